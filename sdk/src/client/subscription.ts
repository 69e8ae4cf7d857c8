/**
 * One stream subscription of the protocol client: where it stands (the bytes
 * received and acknowledged) and who gets its bytes. It survives the loss of
 * a channel: the client subscribes it again on the next from `received`.
 * @module
 */
import type { StreamRef } from '../protocol/frames.ts';
import type { ExecworldError } from '../errors.ts';

/** What a subscription asks of its client. */
export interface SubscriptionHost {
  sendAck(subscription: Subscription): void;
  dropSubscription(subscription: Subscription): void;
}

export interface StreamHandlers {
  /** Bytes at `offset`, in order, never repeated. */
  onData(chunk: Uint8Array, offset: number): void;
  /** Bytes [from, to) are gone for good; delivery goes on at `to`. */
  onGap(from: number, to: number): void;
  /** The stream ended at `offset`, after its last byte; `reset` when a port forward's connection was reset in the world rather than closed. */
  onEnd(offset: number, reset?: boolean): void;
  /** The subscription cannot go on: the connection is lost, or the daemon refused it. */
  onError(error: ExecworldError): void;
}

/** One stream subscription; it survives reconnects. `ack` is the credit flow: it opens the daemon's window again. */
export class Subscription {
  readonly target: StreamRef;
  readonly window: number;
  /** The next offset wanted: every byte before it was delivered. */
  received: number;
  /** The last offset acknowledged to the daemon. */
  acked: number;
  serverSub: number | undefined;
  closed = false;
  readonly handlers: StreamHandlers;
  readonly #host: SubscriptionHost;

  constructor(host: SubscriptionHost, target: StreamRef, from: number, window: number, handlers: StreamHandlers) {
    this.#host = host;
    this.target = target;
    this.received = from;
    this.acked = from;
    this.window = window;
    this.handlers = handlers;
  }

  /** Tells the daemon every byte before `offset` was consumed, which opens the window again. */
  ack(offset: number): void {
    const next = Math.min(offset, this.received);
    if (next <= this.acked) return;
    this.acked = next;
    this.#host.sendAck(this);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.#host.dropSubscription(this);
  }
}
