/**
 * The page's one WebSocket to the daemon: calls by operation name, stream
 * subscriptions with acknowledgements, and a reconnect that keeps trying
 * while the page is open. What a view had open it opens again from
 * `onOpen`, at the offset it had reached.
 */
import { base64url, decodeDataFrame, WS_SUBPROTOCOL, WS_TOKEN_PROTOCOL_PREFIX } from '../../../sdk/src/protocol/codec.ts';
import type { OperationInput, OperationName, OperationResult } from '../../../sdk/src/protocol/operations.ts';

/** An error the daemon answered, with its catalog code; `LINK_LOST` when the connection went before the answer. */
export class CallError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface StreamTarget {
  readonly kind: 'terminal' | 'process';
  readonly id: string;
  readonly stream: 'output' | 'stdout' | 'stderr';
}

export interface StreamListener {
  /** Bytes from `offset`; call `done` once they are shown, which acknowledges them. */
  data(offset: number, bytes: Uint8Array, done: () => void): void;
  /** Bytes [from, to) were dropped by the daemon before this subscription could send them. */
  gap(from: number, to: number): void;
  end(offset: number): void;
}

export interface Subscribed {
  readonly sub: number;
  /** Where delivery starts: the offset asked for, or the oldest byte the daemon still holds. */
  readonly from: number;
  readonly gap: { from: number; to: number } | null;
}

type LinkState = 'connecting' | 'open' | 'closed';

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
}

/** Delay before the next dial after a loss, doubling up to the last. */
const RETRY_MS = [100, 250, 500, 1000, 2000, 4000];

export class Link {
  readonly #token: string;
  #socket: WebSocket | undefined;
  #nextId = 1;
  #attempt = 0;
  readonly #pending = new Map<number, Pending>();
  readonly #streams = new Map<number, StreamListener>();
  #stopped = false;
  /** Called after every successful (re)connect. */
  onOpen: () => void = () => undefined;
  /** Called when a dial ends before the connection opened (the daemon is away, or refused the token). */
  onDialFailed: () => void = () => undefined;
  onState: (state: LinkState, detail: string) => void = () => undefined;

  constructor(token: string) {
    this.#token = token;
  }

  get open(): boolean {
    return this.#socket?.readyState === WebSocket.OPEN;
  }

  start(): void {
    this.#dial();
  }

  /** Closes the connection and dials no more. */
  stop(): void {
    this.#stopped = true;
    this.#socket?.close();
  }

  #dial(): void {
    const url = new URL('/v1/connect', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    this.onState('connecting', 'connecting…');
    const socket = new WebSocket(url, [WS_SUBPROTOCOL, WS_TOKEN_PROTOCOL_PREFIX + base64url(this.#token)]);
    socket.binaryType = 'arraybuffer';
    this.#socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this.#attempt = 0;
      this.onState('open', 'live');
      this.onOpen();
    };
    socket.onmessage = (event: MessageEvent<string | ArrayBuffer>) => {
      if (typeof event.data === 'string') this.#message(JSON.parse(event.data) as ServerText);
      else this.#frame(new Uint8Array(event.data));
    };
    socket.onclose = () => {
      if (this.#socket !== socket) return;
      this.#socket = undefined;
      for (const pending of this.#pending.values()) pending.reject(new CallError('LINK_LOST', 'the connection to the daemon was lost'));
      this.#pending.clear();
      this.#streams.clear();
      if (this.#stopped) return;
      if (!opened) this.onDialFailed();
      const delay = RETRY_MS[Math.min(this.#attempt, RETRY_MS.length - 1)]!;
      this.#attempt += 1;
      this.onState('closed', `connection lost; reconnecting in ${delay} ms`);
      setTimeout(() => {
        if (!this.#stopped) this.#dial();
      }, delay);
    };
  }

  #message(message: ServerText): void {
    switch (message.t) {
      case 'result':
      case 'error': {
        if (message.id === null) return;
        const pending = this.#pending.get(message.id);
        if (pending === undefined) return;
        this.#pending.delete(message.id);
        if (message.t === 'result') pending.resolve(message.result);
        else pending.reject(new CallError(message.error.code, message.error.message));
        return;
      }
      case 'gap':
        this.#streams.get(message.sub)?.gap(message.from, message.to);
        return;
      case 'end': {
        const listener = this.#streams.get(message.sub);
        this.#streams.delete(message.sub);
        listener?.end(message.offset);
        return;
      }
    }
  }

  #frame(bytes: Uint8Array): void {
    const { sub, offset, payload } = decodeDataFrame(bytes);
    const listener = this.#streams.get(sub);
    if (listener === undefined) return;
    const next = offset + payload.length;
    listener.data(offset, payload, () => this.#send({ t: 'ack', sub, offset: next }));
  }

  #send(message: object): void {
    if (this.open) this.#socket!.send(JSON.stringify(message));
  }

  #request(message: Record<string, unknown>): Promise<unknown> {
    if (!this.open) return Promise.reject(new CallError('LINK_LOST', 'not connected to the daemon'));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#send({ ...message, id });
    });
  }

  call<N extends OperationName>(op: N, params: OperationInput<N>): Promise<OperationResult<N>> {
    return this.#request({ t: 'call', op, params }) as Promise<OperationResult<N>>;
  }

  /** Subscribes `listener` to `target` from `from`; it hears nothing until this resolves, and nothing after `unsubscribe`. */
  async subscribe(target: StreamTarget, from: number, listener: StreamListener): Promise<Subscribed> {
    const result = (await this.#request({ t: 'subscribe', params: { target, from } })) as Subscribed;
    // Frames follow the answer on the socket, so the listener is in place before the first of them.
    this.#streams.set(result.sub, listener);
    return result;
  }

  unsubscribe(sub: number): void {
    if (!this.#streams.delete(sub)) return;
    this.#request({ t: 'unsubscribe', sub }).catch(() => undefined);
  }
}

type ServerText =
  | { t: 'result'; id: number; result: unknown }
  | { t: 'error'; id: number | null; error: { code: string; message: string } }
  | { t: 'end'; sub: number; offset: number }
  | { t: 'gap'; sub: number; from: number; to: number };
