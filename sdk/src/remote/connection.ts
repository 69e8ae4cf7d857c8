/**
 * The SDK's one WebSocket to a daemon: calls, stream subscriptions with
 * credits, heartbeats, and reconnection.
 *
 * A dropped connection is not a failure. The connection reconnects on its own;
 * every subscription resumes from the byte after the last one it received, so
 * nothing is lost or repeated; a call in flight is sent again when the
 * operation table says repeating it is safe (reads, waits, writes carrying a
 * writer and sequence number, creates carrying a request id: see
 * `Idempotency` in protocol/operations.ts) and otherwise fails with
 * OUTCOME_UNKNOWN. Only when the daemon
 * cannot be reached again within the reconnect deadline does everything fail,
 * with CONNECTION_LOST.
 *
 * The reconnect state machine, the calls in flight and the subscriptions
 * share the socket's life, so they stay in this one file (about 400 lines);
 * one attempt to open the socket is in `dial.ts`, a subscription's own state
 * in `subscription.ts`.
 * @module
 */
import type { WebSocket } from 'ws';
import { DATA_HEADER_BYTES, decodeDataFrame, type ServerMessage, type StreamRef } from '../protocol/frames.ts';
import { OPERATIONS, isIdempotentCall, type CallName, type OperationInput, type OperationResult } from '../protocol/operations.ts';
import { ConnectionError, remoteError, type ExecworldError } from '../errors.ts';
import type { CertificateAuthority } from './reach.ts';
import { dial } from './dial.ts';
import { Subscription, type StreamHandlers, type SubscriptionHost } from './subscription.ts';

/** What the SDK logs through, when given a logger. */
export interface Logger {
  debug(object: object, message: string): void;
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface ConnectionOptions {
  /** The daemon's base URL, http(s)://host:port. */
  readonly url: string;
  readonly token: string;
  /** Every request's headers: the token where it travels, and the caller's own. */
  readonly headers: Readonly<Record<string, string>>;
  /** Longest wait for one connection attempt. */
  readonly connectTimeoutMs: number;
  /** Longest wait for the answer to a call that is not a long wait. */
  readonly requestTimeoutMs: number;
  /** Ping interval; a daemon silent for two intervals is taken for gone and the connection is remade. */
  readonly heartbeatMs: number;
  /** How long to keep trying to reconnect before everything fails with CONNECTION_LOST. */
  readonly reconnectDeadlineMs: number;
  readonly reconnectInitialDelayMs: number;
  readonly reconnectMaxDelayMs: number;
  /** Credit window per stream. */
  readonly windowBytes: number;
  readonly logger: Logger | undefined;
  /** PEM certificates to trust for an https:// daemon. */
  readonly ca?: CertificateAuthority | undefined;
}

/** How one request is treated; for a call, both come from the operation table. */
interface RequestOptions {
  /** What the request is, for messages: the operation's name. */
  readonly label: string;
  /** Whether it may be sent again after a reconnect without changing its effect. */
  readonly resend: boolean;
  /** Whether it may wait for an event (done, wait, a long poll): then it has no request timeout. */
  readonly waits: boolean;
}

interface PendingCall {
  readonly id: number;
  readonly message: string;
  readonly options: RequestOptions;
  /** The socket it was last sent on, if it was sent. */
  sentOn: WebSocket | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  onResult?: (result: unknown) => void;
  resolve(result: unknown): void;
  reject(error: Error): void;
}

export class Connection implements SubscriptionHost {
  readonly options: ConnectionOptions;
  #socket: WebSocket | undefined;
  #open = false;
  #closed = false;
  #failure: ExecworldError | undefined;
  #nextId = 1;
  readonly #calls = new Map<number, PendingCall>();
  readonly #subscriptions = new Set<Subscription>();
  readonly #byServerSub = new Map<number, Subscription>();
  #lostAt: number | undefined;
  #reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #alive = true;
  /** Resolves when the connection is (again) open. */
  #opened: Promise<void>;
  #resolveOpened!: () => void;

  constructor(options: ConnectionOptions) {
    this.options = options;
    this.#opened = this.#openedPromise();
  }

  #openedPromise(): Promise<void> {
    return new Promise((resolve) => (this.#resolveOpened = resolve));
  }

  #traffic = 0;

  /**
   * Counts the calls sent and the messages received: unchanged between two
   * reads, nothing was asked of the daemon and nothing came from it meanwhile.
   */
  get traffic(): number {
    return this.#traffic;
  }

  /** True while the socket is open. */
  get connected(): boolean {
    return this.#open;
  }

  /** Makes the first connection; fails at once when the daemon refuses or cannot be reached. */
  async start(): Promise<void> {
    const socket = await dial(this.options);
    this.#adopt(socket);
  }

  #adopt(socket: WebSocket): void {
    this.#socket = socket;
    this.#open = true;
    this.#alive = true;
    this.#lostAt = undefined;
    socket.on('message', (data: Buffer, isBinary) => {
      this.#traffic += 1;
      if (isBinary) this.#onData(data);
      else this.#onText(data);
    });
    socket.on('pong', () => (this.#alive = true));
    socket.on('ping', () => (this.#alive = true));
    socket.on('close', () => this.#onClose(socket));
    socket.on('error', (error) => this.options.logger?.debug({ err: error }, 'execworld connection error'));
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => {
      if (!this.#alive) {
        this.options.logger?.warn({ url: this.options.url }, 'execworld daemon missed its heartbeat; reconnecting');
        socket.terminate();
        return;
      }
      this.#alive = false;
      socket.ping();
    }, this.options.heartbeatMs);
    // Resume every stream from the byte after the last one delivered, then every call still owed an answer.
    for (const subscription of this.#subscriptions) this.#sendSubscribe(subscription);
    for (const call of [...this.#calls.values()].sort((a, b) => a.id - b.id)) if (call.sentOn === undefined) this.#send(call);
    this.#resolveOpened();
  }

  #onClose(socket: WebSocket): void {
    if (socket !== this.#socket) return;
    this.#open = false;
    clearInterval(this.#heartbeat);
    this.#byServerSub.clear();
    for (const subscription of this.#subscriptions) subscription.serverSub = undefined;
    if (this.#closed) return;
    this.#opened = this.#openedPromise();
    this.#lostAt ??= Date.now();
    this.options.logger?.info({ url: this.options.url }, 'execworld connection lost; reconnecting');
    for (const call of [...this.#calls.values()]) {
      if (call.sentOn !== socket) continue;
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
    this.#scheduleReconnect(this.options.reconnectInitialDelayMs);
  }

  #scheduleReconnect(delayMs: number): void {
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = setTimeout(() => {
      if (this.#closed) return;
      dial(this.options).then(
        (socket) => {
          if (this.#closed) {
            socket.terminate();
            return;
          }
          this.options.logger?.info({ url: this.options.url }, 'execworld connection restored');
          this.#adopt(socket);
        },
        (error: Error) => {
          const lostFor = Date.now() - (this.#lostAt ?? Date.now());
          if (lostFor >= this.options.reconnectDeadlineMs) {
            this.#fail(
              new ConnectionError(
                'CONNECTION_LOST',
                `the daemon at ${this.options.url} could not be reached again within ${this.options.reconnectDeadlineMs} ms`,
                { cause: error },
              ),
            );
            return;
          }
          this.#scheduleReconnect(Math.min(this.options.reconnectMaxDelayMs, Math.max(delayMs * 2, 1)));
        },
      );
    }, delayMs);
  }

  /** Fails everything still owed: calls reject, subscriptions get onError. */
  #fail(error: ExecworldError): void {
    if (this.#failure !== undefined) return;
    this.#failure = error;
    for (const call of [...this.#calls.values()]) this.#settle(call, error);
    for (const subscription of [...this.#subscriptions]) {
      this.#subscriptions.delete(subscription);
      subscription.handlers.onError(error);
    }
    this.#resolveOpened();
  }

  /**
   * Calls an operation; resolves with its result. The operation table decides
   * whether the call is sent again after a reconnect (for a conditionally
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
    const socket = this.#socket;
    if (socket === undefined || !this.#open) return;
    call.sentOn = socket;
    this.#traffic += 1;
    socket.send(call.message);
  }

  #settle(call: PendingCall, error: Error | undefined, result?: unknown): void {
    if (!this.#calls.delete(call.id)) return;
    clearTimeout(call.timer);
    if (error !== undefined) call.reject(error);
    else call.resolve(result);
  }

  /** Subscribes to a stream from `from`; the subscription lives until it ends, is closed, or the connection fails. */
  subscribe(target: StreamRef, from: number, handlers: StreamHandlers, window = this.options.windowBytes): Subscription {
    const subscription = new Subscription(this, target, from, window, handlers);
    if (this.#failure !== undefined) {
      const failure = this.#failure;
      queueMicrotask(() => handlers.onError(failure));
      return subscription;
    }
    this.#subscriptions.add(subscription);
    if (this.#open) this.#sendSubscribe(subscription);
    return subscription;
  }

  #sendSubscribe(subscription: Subscription): void {
    const params = { target: subscription.target, from: subscription.received, window: subscription.window };
    // Mapped synchronously on the result: data frames may follow it in the same chunk.
    // Not retried as a call: a reconnect subscribes every live subscription anew.
    this.#request({ t: 'subscribe', params }, { label: 'subscribe', resend: false, waits: false }, (result) => {
      const { sub, from } = result as { sub: number; from: number };
      if (subscription.closed) {
        this.#socket?.send(JSON.stringify({ t: 'unsubscribe', id: this.#nextId++, sub }));
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
      subscription.handlers.onError(error);
    });
  }

  sendAck(subscription: Subscription): void {
    if (this.#open && subscription.serverSub !== undefined) {
      this.#socket!.send(`{"t":"ack","sub":${subscription.serverSub},"offset":${subscription.acked}}`);
    }
  }

  dropSubscription(subscription: Subscription): void {
    this.#subscriptions.delete(subscription);
    if (subscription.serverSub !== undefined) {
      this.#byServerSub.delete(subscription.serverSub);
      if (this.#open) this.#socket!.send(JSON.stringify({ t: 'unsubscribe', id: this.#nextId++, sub: subscription.serverSub }));
    }
  }

  #onText(data: Buffer): void {
    let message: ServerMessage;
    try {
      message = JSON.parse(data.toString('utf8')) as ServerMessage;
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
        subscription.handlers.onEnd(message.offset);
        return;
      }
    }
  }

  #onData(data: Buffer): void {
    if (data.length < DATA_HEADER_BYTES) return;
    const { sub, offset, payload } = decodeDataFrame(data);
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

  /** Resolves once the connection is open again (or failed). */
  whenOpen(): Promise<void> {
    return this.#opened;
  }

  /** Closes the socket; calls still owed fail with CLOSED. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    clearInterval(this.#heartbeat);
    const closed = new ConnectionError('CLOSED', 'the runtime is closed');
    for (const call of [...this.#calls.values()]) this.#settle(call, closed);
    for (const subscription of [...this.#subscriptions]) subscription.handlers.onError(closed);
    this.#subscriptions.clear();
    this.#socket?.close(1000, 'closed by the client');
  }
}
