/**
 * The protocol of `GET /v1/connect`, over any {@link Channel}: calls and their
 * answers, the resend of a call in flight when its channel closed, stream
 * subscriptions with credits, and their resume on the next channel. It knows
 * nothing of what carries the frames nor of how a channel is opened again;
 * its transport hands it each open channel (`attach`) and hears from it when
 * one was lost (`onlost`). The SDK's `Connection` pairs it with a Node `ws`
 * channel, the browser view with a DOM `WebSocket` one, the tests with a
 * linked pair in memory.
 *
 * A lost channel is not a failure. Every subscription resumes on the next
 * channel from the byte after the last one it received, so nothing is lost or
 * repeated; a call in flight is sent again when the operation table says
 * repeating it is safe (reads, waits, writes carrying a writer and sequence
 * number, creates carrying a request id: see `Idempotency` in
 * protocol/operations.ts) and otherwise fails with OUTCOME_UNKNOWN. A call
 * made while no channel is open waits for the next one. Only the transport
 * decides that none will come (`fail`).
 *
 * Runtime-neutral: nothing of Node, of a socket library or of the DOM.
 * @module
 */
import { DATA_HEADER_BYTES, decodeDataFrame, encodeDataFrame, WRITE_FRAME } from '../protocol/codec.ts';
import { ERROR_CATALOG } from '../protocol/errors.ts';
import type { ServerMessage, StreamRef } from '../protocol/frames.ts';
import { OPERATIONS, isIdempotentCall, type CallName, type OperationInput, type OperationResult } from '../protocol/operations.ts';
import { ConnectionError, LimitError, remoteError, type ExecworldError } from '../errors.ts';
import type { Channel, ChannelCloseReason } from './channel.ts';
import { Subscription, type StreamHandlers, type SubscriptionHost } from './subscription.ts';
import { ForwardWriter, type ForwardWriterHost } from './forward-writer.ts';

/** Largest payload of one write frame, as the daemon's data frames. */
const WRITE_FRAME_BYTES = 64 * 1024;

/** What the SDK logs through, when given a logger. */
export interface Logger {
  debug(object: object, message: string): void;
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

/**
 * The most calls owed an answer at once, sent or waiting for a channel: the
 * daemon takes no more in flight on one connection (MAX_CALLS_IN_FLIGHT in
 * service/src/server/ws.ts), so a client holding more would only have them
 * refused once they went out.
 */
export const MAX_CALLS_OWED = 4096;
/** The most subscriptions open at once, as the daemon allows on one connection (MAX_SUBSCRIPTIONS there). */
export const MAX_CLIENT_SUBSCRIPTIONS = 1024;

export interface ProtocolClientOptions {
  /** Longest wait for the answer to a call that is not a long wait. */
  readonly requestTimeoutMs: number;
  /** Credit window per stream. */
  readonly windowBytes: number;
  readonly logger?: Logger | undefined;
  /** At most this many calls owed an answer; another fails with LIMIT_EXCEEDED. @default MAX_CALLS_OWED */
  readonly maxCalls?: number | undefined;
  /** At most this many subscriptions open; another fails with LIMIT_EXCEEDED. @default MAX_CLIENT_SUBSCRIPTIONS */
  readonly maxSubscriptions?: number | undefined;
}

/** How one request is treated; for a call, both come from the operation table. */
interface RequestOptions {
  /** What the request is, for messages: the operation's name. */
  readonly label: string;
  /** Whether it may be sent again on a new channel without changing its effect. */
  readonly resend: boolean;
  /** Whether it may wait for an event (done, wait, a long poll): then it has no request timeout. */
  readonly waits: boolean;
}

interface PendingCall {
  readonly id: number;
  readonly message: string;
  readonly options: RequestOptions;
  /** The channel it was last sent on, if it was sent. */
  sentOn: Channel | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  onResult?: (result: unknown) => void;
  resolve(result: unknown): void;
  reject(error: Error): void;
}

export class ProtocolClient implements SubscriptionHost, ForwardWriterHost {
  readonly options: ProtocolClientOptions;
  #channel: Channel | undefined;
  #open = false;
  #closed = false;
  #failure: ExecworldError | undefined;
  #nextId = 1;
  readonly #calls = new Map<number, PendingCall>();
  readonly #subscriptions = new Set<Subscription>();
  readonly #byServerSub = new Map<number, Subscription>();
  /** The port forwards' directions toward the world, by forward number. */
  readonly #writers = new Map<number, ForwardWriter>();
  /** Resolves when a channel is (again) open, or the client failed. */
  #opened: Promise<void>;
  #resolveOpened!: () => void;
  #traffic = 0;
  /**
   * Called when the channel in use closed while the client is not closed:
   * the transport's cue to open another and `attach` it, or to `fail`.
   */
  onlost: ((reason: ChannelCloseReason) => void) | undefined;

  constructor(options: ProtocolClientOptions) {
    this.options = options;
    this.#opened = this.#openedPromise();
  }

  #openedPromise(): Promise<void> {
    return new Promise((resolve) => (this.#resolveOpened = resolve));
  }

  /**
   * Counts the calls sent and the frames received: unchanged between two
   * reads, nothing was asked of the daemon and nothing came from it meanwhile.
   */
  get traffic(): number {
    return this.#traffic;
  }

  /** True while a channel is open. */
  get connected(): boolean {
    return this.#open;
  }

  /** The failure that ended the client, once `fail` was called. */
  get failure(): ExecworldError | undefined {
    return this.#failure;
  }

  /**
   * Takes an open channel: every stream is subscribed again from the byte
   * after the last one delivered, then every call still owed an answer and
   * not sent on a live channel goes out, in the order it was made. A client
   * that is closed or failed closes the channel instead.
   */
  attach(channel: Channel): void {
    if (this.#closed || this.#failure !== undefined) {
      channel.close(1000, 'closed by the client');
      return;
    }
    this.#channel = channel;
    this.#open = true;
    channel.onmessage = (frame) => {
      this.#traffic += 1;
      if (typeof frame === 'string') this.#onText(frame);
      else this.#onData(frame);
    };
    channel.onclose = (reason) => this.#onClose(channel, reason);
    for (const subscription of this.#subscriptions) this.#sendSubscribe(subscription);
    // Before the calls: a forward's shutdown call comes after its last bytes.
    for (const writer of this.#writers.values()) for (const { offset, bytes } of writer.resend()) this.sendWrite(writer, offset, bytes);
    for (const call of [...this.#calls.values()].sort((a, b) => a.id - b.id)) if (call.sentOn === undefined) this.#send(call);
    this.#resolveOpened();
  }

  #onClose(channel: Channel, reason: ChannelCloseReason): void {
    if (channel !== this.#channel) return;
    this.#open = false;
    this.#byServerSub.clear();
    for (const subscription of this.#subscriptions) subscription.serverSub = undefined;
    if (this.#closed) return;
    this.#opened = this.#openedPromise();
    for (const call of [...this.#calls.values()]) {
      if (call.sentOn !== channel) continue;
      if (call.options.resend) {
        call.sentOn = undefined;
      } else {
        this.#settle(
          call,
          new ConnectionError(
            'OUTCOME_UNKNOWN',
            `the connection broke before the daemon answered ${call.options.label}, which is not safe to send again: it may or may not have taken effect`,
          ),
        );
      }
    }
    this.onlost?.(reason);
  }

  /** Fails everything still owed, and whatever is asked from now on: calls reject, subscriptions get onError. */
  fail(error: ExecworldError): void {
    if (this.#failure !== undefined) return;
    this.#failure = error;
    for (const call of [...this.#calls.values()]) this.#settle(call, error);
    for (const subscription of [...this.#subscriptions]) {
      this.#subscriptions.delete(subscription);
      subscription.handlers.onError(error);
    }
    // Their forwards' output subscriptions failed above: what they kept for a resend goes with them.
    for (const writer of [...this.#writers.values()]) writer.close();
    this.#resolveOpened();
  }

  /**
   * Calls an operation; resolves with its result. The operation table decides
   * whether the call is sent again on a new channel (for a conditionally
   * idempotent operation, by whether `params` carry its fields) and whether it
   * waits without a request timeout.
   */
  call<N extends CallName>(op: N, params: OperationInput<N>): Promise<OperationResult<N>> {
    // An operation this SDK does not know (a caller without types) goes out as asked: the daemon answers NOT_FOUND for one it does not know either.
    const spec = Object.hasOwn(OPERATIONS, op) ? OPERATIONS[op] : undefined;
    const options = { label: op, resend: spec !== undefined && isIdempotentCall(spec, params), waits: spec?.waits ?? false };
    // The daemon's answer is the operation's result: the table's schema is the daemon's contract.
    return this.#request({ t: 'call', op, params }, options) as Promise<OperationResult<N>>;
  }

  #request(message: Record<string, unknown>, options: RequestOptions, onResult?: (result: unknown) => void): Promise<unknown> {
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#closed) return Promise.reject(new ConnectionError('CLOSED', 'the runtime is closed'));
    const maxCalls = this.options.maxCalls ?? MAX_CALLS_OWED;
    if (this.#calls.size >= maxCalls) {
      return Promise.reject(
        new LimitError('LIMIT_EXCEEDED', `${options.label} refused: ${maxCalls} calls are already waiting for an answer`, ERROR_CATALOG.LIMIT_EXCEEDED.status),
      );
    }
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const call: PendingCall = {
        id,
        message: JSON.stringify({ ...message, id }),
        options,
        sentOn: undefined,
        timer: undefined,
        resolve,
        reject,
        ...(onResult === undefined ? {} : { onResult }),
      };
      this.#calls.set(id, call);
      if (!options.waits) {
        call.timer = setTimeout(() => {
          this.#settle(call, new ConnectionError('REQUEST_TIMEOUT', `no answer to ${options.label} within ${this.options.requestTimeoutMs} ms`));
        }, this.options.requestTimeoutMs);
      }
      if (this.#open) this.#send(call);
    });
  }

  #send(call: PendingCall): void {
    const channel = this.#channel;
    if (channel === undefined || !this.#open) return;
    call.sentOn = channel;
    this.#traffic += 1;
    channel.send(call.message);
  }

  #settle(call: PendingCall, error: Error | undefined, result?: unknown): void {
    if (!this.#calls.delete(call.id)) return;
    clearTimeout(call.timer);
    if (error !== undefined) call.reject(error);
    else call.resolve(result);
  }

  /** Subscribes to a stream from `from`; the subscription lives until it ends, is closed, or the client fails. */
  subscribe(target: StreamRef, from: number, handlers: StreamHandlers, window = this.options.windowBytes): Subscription {
    const subscription = new Subscription(this, target, from, window, handlers);
    const maxSubscriptions = this.options.maxSubscriptions ?? MAX_CLIENT_SUBSCRIPTIONS;
    const refusal =
      this.#failure ??
      (this.#closed ? new ConnectionError('CLOSED', 'the runtime is closed') : undefined) ??
      (this.#subscriptions.size >= maxSubscriptions
        ? new LimitError('LIMIT_EXCEEDED', `at most ${maxSubscriptions} subscriptions may be open at once`, ERROR_CATALOG.LIMIT_EXCEEDED.status)
        : undefined);
    if (refusal !== undefined) {
      subscription.closed = true;
      queueMicrotask(() => handlers.onError(refusal));
      return subscription;
    }
    this.#subscriptions.add(subscription);
    if (this.#open) this.#sendSubscribe(subscription);
    return subscription;
  }

  #sendSubscribe(subscription: Subscription): void {
    const params = { target: subscription.target, from: subscription.received, window: subscription.window };
    // Mapped synchronously on the result: data frames may follow it in the same chunk.
    // Not resent as a call: every channel attached subscribes every live subscription anew.
    this.#request({ t: 'subscribe', params }, { label: 'subscribe', resend: false, waits: false }, (result) => {
      const { sub, from } = result as { sub: number; from: number };
      if (subscription.closed) {
        this.#channel?.send(JSON.stringify({ t: 'unsubscribe', id: this.#nextId++, sub }));
        return;
      }
      subscription.serverSub = sub;
      this.#byServerSub.set(sub, subscription);
      if (from > subscription.received) {
        const gapFrom = subscription.received;
        subscription.received = from;
        subscription.acked = Math.max(subscription.acked, from);
        subscription.handlers.onGap(gapFrom, from);
      }
    }).catch((error: ExecworldError) => {
      if (error.code === 'OUTCOME_UNKNOWN' || subscription.closed) return;
      this.#subscriptions.delete(subscription);
      subscription.closed = true;
      subscription.handlers.onError(error);
    });
  }

  /** A port forward's direction toward the world (see {@link ForwardWriter}); it lives until it is closed. */
  forwardWriter(fwd: number): ForwardWriter {
    const writer = new ForwardWriter(this, fwd);
    this.#writers.get(fwd)?.close();
    this.#writers.set(fwd, writer);
    return writer;
  }

  sendWrite(writer: ForwardWriter, offset: number, bytes: Uint8Array): void {
    if (!this.#open || writer.closed) return;
    for (let at = 0; at < bytes.length; at += WRITE_FRAME_BYTES) {
      this.#channel!.sendBinary(encodeDataFrame(writer.fwd, offset + at, bytes.subarray(at, at + WRITE_FRAME_BYTES), WRITE_FRAME));
    }
  }

  dropWriter(writer: ForwardWriter): void {
    if (this.#writers.get(writer.fwd) === writer) this.#writers.delete(writer.fwd);
  }

  sendAck(subscription: Subscription): void {
    if (this.#open && subscription.serverSub !== undefined) {
      this.#channel!.send(`{"t":"ack","sub":${subscription.serverSub},"offset":${subscription.acked}}`);
    }
  }

  dropSubscription(subscription: Subscription): void {
    this.#subscriptions.delete(subscription);
    if (subscription.serverSub !== undefined) {
      this.#byServerSub.delete(subscription.serverSub);
      if (this.#open) this.#channel!.send(JSON.stringify({ t: 'unsubscribe', id: this.#nextId++, sub: subscription.serverSub }));
    }
  }

  #onText(text: string): void {
    let message: ServerMessage;
    try {
      message = JSON.parse(text) as ServerMessage;
    } catch (_error) {
      this.options.logger?.warn({}, 'execworld daemon sent a message that is not JSON');
      return;
    }
    switch (message.t) {
      case 'result': {
        const call = this.#calls.get(message.id);
        if (call === undefined) return;
        call.onResult?.(message.result);
        this.#settle(call, undefined, message.result);
        return;
      }
      case 'error': {
        const call = message.id === null ? undefined : this.#calls.get(message.id);
        if (call === undefined) {
          this.options.logger?.warn({ error: message.error }, 'execworld daemon reported an error');
          return;
        }
        this.#settle(call, remoteError(message.error));
        return;
      }
      case 'gap': {
        const subscription = this.#byServerSub.get(message.sub);
        if (subscription === undefined || message.to <= subscription.received) return;
        const from = subscription.received;
        subscription.received = message.to;
        subscription.acked = Math.max(subscription.acked, message.to);
        subscription.handlers.onGap(from, message.to);
        return;
      }
      case 'end': {
        const subscription = this.#byServerSub.get(message.sub);
        if (subscription === undefined) return;
        this.#byServerSub.delete(message.sub);
        this.#subscriptions.delete(subscription);
        subscription.closed = true;
        subscription.handlers.onEnd(message.offset, message.reset === true);
        return;
      }
      case 'written':
        this.#writers.get(message.fwd)?.onWritten(message.offset);
        return;
    }
  }

  #onData(data: Uint8Array): void {
    if (data.length < DATA_HEADER_BYTES) return;
    let frame: ReturnType<typeof decodeDataFrame>;
    try {
      frame = decodeDataFrame(data);
    } catch (_error) {
      this.options.logger?.warn({}, 'execworld daemon sent a binary frame that is not a data frame');
      return;
    }
    const { sub, offset, payload } = frame;
    const subscription = this.#byServerSub.get(sub);
    if (subscription === undefined || subscription.closed) return;
    const end = offset + payload.length;
    if (end <= subscription.received) return;
    if (offset > subscription.received) subscription.handlers.onGap(subscription.received, offset);
    // After a resubscribe the daemon starts exactly at `received`; trim defensively anyway.
    const chunk = offset < subscription.received ? payload.subarray(subscription.received - offset) : payload;
    const at = Math.max(offset, subscription.received);
    subscription.received = end;
    subscription.handlers.onData(chunk, at);
  }

  /** Resolves once a channel is open again (or the client failed). */
  whenOpen(): Promise<void> {
    return this.#opened;
  }

  /** Closes the channel; calls still owed fail with CLOSED, subscriptions get onError. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const closed = new ConnectionError('CLOSED', 'the runtime is closed');
    for (const call of [...this.#calls.values()]) this.#settle(call, closed);
    for (const subscription of [...this.#subscriptions]) subscription.handlers.onError(closed);
    this.#subscriptions.clear();
    for (const writer of [...this.#writers.values()]) writer.close();
    this.#channel?.close(1000, 'closed by the client');
  }
}
