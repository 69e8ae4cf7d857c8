/**
 * Keeps a protocol client connected: when its channel is lost, dials a new
 * one after a delay that doubles from the first up to the longest, and hands
 * it to the client. A transport gives the dial (a Node `ws` socket for the
 * SDK, the DOM's `WebSocket` for the browser view); the deadline says how
 * long a loss may last before the client fails with CONNECTION_LOST (the
 * SDK's `reconnectDeadlineMs`; the browser view keeps trying while it is
 * open).
 * @module
 */
import { ConnectionError } from '../errors.ts';
import type { Channel, ChannelCloseReason } from './channel.ts';
import type { ProtocolClient } from './protocol-client.ts';

export interface RedialOptions {
  /** What is dialed, for the CONNECTION_LOST message: the daemon's URL. */
  readonly target: string;
  /** The delay before the first dial after a loss; it doubles after each dial that fails. */
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  /** How long after the loss to keep dialing before the client fails with CONNECTION_LOST; Infinity for as long as it is not stopped. */
  readonly deadlineMs: number;
}

/** What the transport hears of the loop, to log or show it. */
export interface RedialEvents {
  /** The channel was lost; the next dial is in `delayMs`. */
  onLost?(reason: ChannelCloseReason, delayMs: number): void;
  /** A dial begins. */
  onDialing?(): void;
  /** A dial opened a channel, now attached to the client. */
  onOpen?(channel: Channel): void;
  /** A dial failed; the next is in `delayMs` (none when the deadline passed and the client failed). */
  onDialFailed?(error: Error, delayMs: number | undefined): void;
}

export class Redialer {
  readonly #client: ProtocolClient;
  readonly #dial: () => Promise<Channel>;
  readonly #options: RedialOptions;
  readonly #events: RedialEvents;
  #lostAt: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  /** Takes the client's `onlost`: from now on each loss of its channel starts the loop. */
  constructor(client: ProtocolClient, dial: () => Promise<Channel>, options: RedialOptions, events: RedialEvents = {}) {
    this.#client = client;
    this.#dial = dial;
    this.#options = options;
    this.#events = events;
    client.onlost = (reason) => this.#lost(reason);
  }

  /** Dials now, and again after each failure until a dial opens or the deadline passes (a first connection that may wait for its daemon). */
  start(): void {
    this.#lostAt ??= Date.now();
    this.#attempt(this.#options.initialDelayMs);
  }

  /** Dials no more; a dial under way closes its channel when it opens. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #lost(reason: ChannelCloseReason): void {
    if (this.#stopped) return;
    this.#lostAt ??= Date.now();
    this.#events.onLost?.(reason, this.#options.initialDelayMs);
    this.#schedule(this.#options.initialDelayMs);
  }

  #schedule(delayMs: number): void {
    clearTimeout(this.#timer);
    const next = Math.min(this.#options.maxDelayMs, Math.max(delayMs * 2, 1));
    this.#timer = setTimeout(() => this.#attempt(next), delayMs);
  }

  /** One dial; `nextDelayMs` is the wait before the next should it fail. */
  #attempt(nextDelayMs: number): void {
    if (this.#stopped || this.#client.failure !== undefined) return;
    this.#events.onDialing?.();
    this.#dial().then(
      (channel) => {
        if (this.#stopped) {
          channel.close(1000, 'closed by the client');
          return;
        }
        this.#lostAt = undefined;
        this.#client.attach(channel);
        if (channel.state === 'open') this.#events.onOpen?.(channel);
      },
      (error: Error) => {
        if (this.#stopped) return;
        const lostFor = Date.now() - (this.#lostAt ?? Date.now());
        if (lostFor >= this.#options.deadlineMs) {
          this.#events.onDialFailed?.(error, undefined);
          this.#client.fail(
            new ConnectionError('CONNECTION_LOST', `the daemon at ${this.#options.target} could not be reached again within ${this.#options.deadlineMs} ms`, {
              cause: error,
            }),
          );
          return;
        }
        this.#events.onDialFailed?.(error, nextDelayMs);
        this.#schedule(nextDelayMs);
      },
    );
  }
}
