import { pino } from 'pino';
import { WebSocket } from 'ws';
import { WS_SUBPROTOCOL, type ServerMessage } from '@execworld/sdk/protocol';
import type { ExecutionProvider } from '../../service/src/provider/api.ts';
import { buildApp, type Daemon } from '../../service/src/server/app.ts';
import { TokenTable, type TokenEntry } from '../../service/src/server/auth.ts';
import { DEFAULT_CONFIG, type Config } from '../../service/src/server/config.ts';

export const ALICE = 'alice-token-0123456789abcdef';
export const BOB = 'bob-token-0123456789abcdefgh';
/** A read-only token of alice's (`access=read`): it sees her sessions and may not act on them. */
export const ALICE_READER = 'alice-reader-token-0123456789';

export interface TestDaemon {
  readonly url: string;
  readonly wsUrl: string;
  readonly daemon: Daemon;
  /** fetch against the daemon with alice's token unless `token` says otherwise (null: none). */
  request(
    method: string,
    path: string,
    options?: { body?: unknown; token?: string | null; headers?: Record<string, string>; raw?: string },
  ): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

export interface InProcessDaemonOptions {
  /** The provider, instead of the host's. */
  readonly runtime?: ExecutionProvider;
  /** Owners beside alice and bob. */
  readonly owners?: readonly TokenEntry[];
}

/** A daemon built with buildApp in this process, listening on a free port of 127.0.0.1; tests get one through daemon-test.ts's fixtures. */
export async function startInProcessDaemon(overrides: Partial<Config> = {}, options: InProcessDaemonOptions = {}): Promise<TestDaemon> {
  const config = { ...DEFAULT_CONFIG, host: '127.0.0.1', port: 0, logLevel: 'silent', ...overrides } as Config;
  const tokens = new TokenTable(
    [{ owner: 'alice', token: ALICE }, { owner: 'alice', token: ALICE_READER, access: 'read' }, { owner: 'bob', token: BOB }, ...(options.owners ?? [])],
    'test',
  );
  const daemon = buildApp({ config, tokens, logger: pino({ level: 'silent' }), ...(options.runtime === undefined ? {} : { runtime: options.runtime }) });
  const address = await daemon.app.listen({ host: '127.0.0.1', port: 0 });
  let closing: Promise<void> | undefined;
  return {
    url: address,
    wsUrl: `${address.replace(/^http/, 'ws')}/v1/connect`,
    daemon,
    async request(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const token = options.token === undefined ? ALICE : options.token;
      if (token !== null) headers.authorization = `Bearer ${token}`;
      let body: string | undefined = options.raw;
      if (options.body !== undefined) {
        body = JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      const response = await fetch(`${address}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch (_error) {
        // Left as text.
      }
      return { status: response.status, body: parsed as any };
    },
    // Closing twice is closing once: a test may close its daemon itself, and its fixture closes it again.
    close: () => (closing ??= daemon.app.close()),
  };
}

/** A minimal client of the WebSocket protocol, for tests. */
export class TestSocket {
  readonly socket: WebSocket;
  readonly messages: ServerMessage[] = [];
  readonly data = new Map<number, { offset: number; payload: Buffer }[]>();
  #nextId = 1;
  #waiters: (() => void)[] = [];

  private constructor(socket: WebSocket) {
    this.socket = socket;
    socket.on('message', (raw: Buffer, isBinary) => {
      if (isBinary) {
        const sub = raw.readUInt32BE(1);
        const offset = Number(raw.readBigUInt64BE(5));
        const list = this.data.get(sub) ?? [];
        list.push({ offset, payload: raw.subarray(13) });
        this.data.set(sub, list);
      } else {
        this.messages.push(JSON.parse(raw.toString('utf8')) as ServerMessage);
      }
      for (const waiter of this.#waiters.splice(0)) waiter();
    });
  }

  static open(url: string, options: { token?: string; protocols?: string[]; headers?: Record<string, string> } = {}): Promise<TestSocket> {
    const headers = { ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }), ...options.headers };
    const socket = new WebSocket(url, options.protocols ?? [WS_SUBPROTOCOL], { headers });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(new TestSocket(socket)));
      socket.once('unexpected-response', (request, response) => {
        request.destroy();
        reject(Object.assign(new Error(`upgrade refused: ${response.statusCode}`), { status: response.statusCode }));
      });
      socket.once('error', reject);
    });
  }

  /** Waits until `predicate` holds over what arrived. */
  async until<T>(what: string, predicate: () => T | undefined, timeoutMs = 10_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = predicate();
      if (value !== undefined && value !== false) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  /**
   * Sends `message` as it is. A message of a test's own id moves the ids of
   * {@link call} and {@link subscribe} past it: were they to reuse it, they
   * would take the answer to the test's message for theirs.
   */
  send(message: unknown): void {
    const id = (message as { id?: unknown } | null)?.id;
    if (typeof id === 'number' && id >= this.#nextId) this.#nextId = id + 1;
    this.socket.send(JSON.stringify(message));
  }

  async call(op: string, params: Record<string, unknown> = {}): Promise<any> {
    const id = this.#nextId++;
    this.send({ t: 'call', id, op, params });
    const reply = await this.until(`reply to ${op}`, () => this.messages.find((m) => (m.t === 'result' || m.t === 'error') && m.id === id));
    if (reply.t === 'error') throw Object.assign(new Error(reply.error.message), { code: reply.error.code });
    return (reply as { result: unknown }).result;
  }

  async subscribe(params: Record<string, unknown>): Promise<{ sub: number; from: number; gap: { from: number; to: number } | null }> {
    const id = this.#nextId++;
    this.send({ t: 'subscribe', id, params });
    const reply = await this.until('subscribe reply', () => this.messages.find((m) => (m.t === 'result' || m.t === 'error') && m.id === id));
    if (reply.t === 'error') throw Object.assign(new Error(reply.error.message), { code: reply.error.code });
    return (reply as { result: { sub: number; from: number; gap: { from: number; to: number } | null } }).result;
  }

  /** The bytes received on `sub`, checking that frames are contiguous. */
  bytes(sub: number): Buffer {
    const frames = this.data.get(sub) ?? [];
    return Buffer.concat(frames.map((frame) => frame.payload));
  }

  close(): void {
    this.socket.close();
  }
}
