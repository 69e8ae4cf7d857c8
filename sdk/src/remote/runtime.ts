/**
 * `RemoteRuntime`: the subprocess seam over a daemon, a drop-in for a local
 * provider. `connect(url)` opens it.
 * @module
 */
import { PROTOCOL_VERSION } from '../protocol/version.ts';
import type { CallName, OperationInput, OperationResult } from '../protocol/operations.ts';
import type { SubprocessRuntime } from '../seam/types.ts';
import { spawnDefaults, terminalDefaults, type SpawnRequest, type TerminalSpawnRequest } from '../seam/defaults.ts';
import { runCommand, type CommandResult, type RunCommandOptions } from '../seam/run.ts';
import { endAll, settleAll } from '../seam/teardown.ts';
import { abortReasonText, assertEnvironment, assertGraceMs, assertProgram, type InvalidArgument } from '../seam/validate.ts';
import { randomUUID } from 'node:crypto';
import { ConnectionError, invalidArgument } from '../errors.ts';
import { Connection, type ConnectionOptions, type Logger } from './connection.ts';
import { RemoteProcess } from './process.ts';
import { daemonHeaders, type TokenHeader } from './headers.ts';
import { RawHttp } from './raw-http.ts';
import { readLocalToken } from '../token-file.ts';
import { describeUnreachable, getJson, type CertificateAuthority } from './reach.ts';
import { RemoteTerminal, type TerminalScreen } from './terminal.ts';

/** What a terminal create takes beyond the seam's spec. */
export interface RemoteTerminalOptions {
  /**
   * Whether the daemon answers the queries the program sends its terminal
   * (cursor position, device attributes, …). False for a client that runs its
   * own terminal emulator and answers them itself.
   * @default true
   */
  readonly answerQueries?: boolean;
}

export interface ConnectOptions {
  /**
   * The bearer token.
   * @default the first token in $XDG_CONFIG_HOME/execworld/token (~/.config/execworld/token), where a local daemon writes it
   */
  readonly token?: string;
  /** Longest wait for one connection attempt. @default 10000 */
  readonly connectTimeoutMs?: number;
  /** Longest wait for an answer to a call that is not a long wait. @default 30000 */
  readonly requestTimeoutMs?: number;
  /** Ping interval; two silent intervals mean the daemon is gone and the connection is remade. @default 10000 */
  readonly heartbeatMs?: number;
  /** How long a dropped connection is retried before everything fails with CONNECTION_LOST. @default 60000 */
  readonly reconnectDeadlineMs?: number;
  /** First delay between reconnect attempts; it doubles up to reconnectMaxDelayMs. @default 100 */
  readonly reconnectInitialDelayMs?: number;
  /** @default 2000 */
  readonly reconnectMaxDelayMs?: number;
  /** Bytes of a stream the daemon may send beyond what was consumed. @default 262144 */
  readonly windowBytes?: number;
  /** Where the SDK logs reconnects and failures. @default none */
  readonly logger?: Logger;
  /**
   * PEM certificates to trust for an https:// daemon with its own certificate:
   * the CA that signed it, or a self-signed daemon's own certificate.
   * @default Node's bundled CAs
   */
  readonly ca?: CertificateAuthority;
  /**
   * Headers sent with every request and WebSocket upgrade, for a proxy in
   * front of the daemon (a router's routing headers; see {@link sandboxRouter}).
   */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Where the token travels: `authorization`, or `x-execworld-token` for a
   * proxy that strips `Authorization`.
   * @default 'authorization'
   */
  readonly tokenHeader?: TokenHeader;
}

export const DEFAULT_CONNECT_OPTIONS = {
  connectTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  heartbeatMs: 10_000,
  reconnectDeadlineMs: 60_000,
  reconnectInitialDelayMs: 100,
  reconnectMaxDelayMs: 2_000,
  windowBytes: 256 * 1024,
} as const;

function resolveOptions(url: string, options: ConnectOptions): ConnectionOptions {
  if (!/^https?:\/\/[^/]+/.test(url)) throw invalidArgument(`url must be http(s)://host:port, got ${url}`);
  const local = options.token === undefined ? readLocalToken(process.env) : { token: options.token };
  if ('missing' in local) {
    throw invalidArgument(`no token given, and ${local.missing} (the file a daemon on this machine writes): pass connect(url, { token })`);
  }
  const token = local.token;
  const resolved = { ...DEFAULT_CONNECT_OPTIONS, ...stripUndefined(options) };
  for (const key of Object.keys(DEFAULT_CONNECT_OPTIONS) as (keyof typeof DEFAULT_CONNECT_OPTIONS)[]) {
    const value = resolved[key];
    if (!Number.isSafeInteger(value) || value <= 0) throw invalidArgument(`options.${key} must be a positive integer, got ${String(value)}`);
  }
  const headers = daemonHeaders(token, options.tokenHeader, options.headers);
  return { ...resolved, url, token, headers, logger: options.logger, ca: options.ca };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;
}

const invalid: InvalidArgument = (message) => invalidArgument(message);

/** Throws for the specs the local provider would refuse before any work, with its messages (the seam's checks). */
function assertSpawnSpec(spec: { argv?: unknown; graceMs?: unknown; env?: unknown }, programMessage: string): void {
  assertProgram(spec?.argv, programMessage, invalid);
  assertGraceMs(spec.graceMs, invalid);
  if (spec.env !== undefined) assertEnvironment(spec.env, invalid);
}

/**
 * The subprocess seam over one daemon. Every handle runs in the daemon's
 * execution world: paths, PATH lookups and working directories are the
 * daemon host's.
 */
export class RemoteRuntime implements SubprocessRuntime {
  readonly url: string;
  readonly #connection: Connection;
  readonly #options: ConnectionOptions;
  #started: Promise<void> | undefined;
  #health: OperationResult<'health.get'> | undefined;
  #http: RawHttp | undefined;
  /** Handles this runtime made and has not seen end, for disposal. */
  readonly #processes = new Set<RemoteProcess>();
  readonly #terminals = new Set<RemoteTerminal>();
  #disposing: Promise<void> | undefined;

  /** Prefer {@link connect}; this constructor connects lazily, on the first call. */
  constructor(url: string, options: ConnectOptions = {}) {
    this.#options = resolveOptions(url, options);
    this.url = url;
    this.#connection = new Connection(this.#options);
  }

  /** Opens the connection after checking the daemon's protocol version. Idempotent. */
  start(): Promise<void> {
    this.#started ??= (async () => {
      let health: OperationResult<'health.get'>;
      try {
        health = (await getJson(`${this.url.replace(/\/+$/, '')}/v1/health`, {
          headers: this.#options.headers,
          ca: this.#options.ca,
          timeoutMs: this.#options.connectTimeoutMs,
        })) as OperationResult<'health.get'>;
      } catch (error) {
        throw new ConnectionError('CONNECTION_FAILED', describeUnreachable(this.url, error), { cause: error });
      }
      if (health.protocolVersion !== PROTOCOL_VERSION) {
        throw new ConnectionError('PROTOCOL_MISMATCH', `the daemon speaks protocol ${health.protocolVersion}; this SDK speaks ${PROTOCOL_VERSION}`);
      }
      this.#health = health;
      await this.#connection.start();
    })();
    return this.#started;
  }

  /**
   * Calls an operation by name; for the extensions the seam has no verb for.
   * Whether it is sent again after a reconnect, and whether it waits without a
   * request timeout, is the operation table's to say.
   */
  async call<N extends CallName>(op: N, params: OperationInput<N>): Promise<OperationResult<N>> {
    await this.start();
    return await this.#connection.call(op, params);
  }

  async resolveExecutable(command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    const call = this.call('executable.resolve', { command, ...(env === undefined ? {} : { env }) });
    if (signal === undefined) return (await call).path;
    // The seam rejects with exactly the signal's reason, whatever it is.
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
    const aborted = new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    return (await Promise.race([call, aborted])).path;
  }

  /**
   * Starts a managed process tree and returns at once. `pid` is -1 until the
   * daemon acknowledged the spawn (await `handle.started` for the real pid);
   * streams, `done`, `terminate` and `waitForExit` all wait for that first.
   *
   * Beyond the seam, `cwd`, `stdio` (or any of its entries) and `graceMs` may
   * be left out: stdio entries are pipes and the grace is 5 s (filled in here,
   * where the streams are made), and the daemon picks the working directory:
   * the owner's home for an owner mapped to an OS user, else its own.
   * `user` names the OS user it runs as, where the owner may, and `limits`
   * what its tree may use together (daemon extensions); the handle's
   * `usage()` says what it used once `done` settled.
   */
  spawn(request: SpawnRequest): RemoteProcess {
    assertProgram(request?.argv, 'expected a non-empty program name at argv[0]', invalid);
    const spec = spawnDefaults(request);
    assertSpawnSpec(spec, 'expected a non-empty program name at argv[0]');
    if (spec.signal?.aborted === true) {
      throw invalidArgument(`aborted before spawn: ${abortReasonText(spec.signal)}`, { cause: spec.signal.reason });
    }
    this.#assertOpen();
    void this.start().catch(() => undefined);
    const handle = new RemoteProcess(this.#connection, spec, this.#options.logger);
    this.#processes.add(handle);
    const release = (): void => {
      this.#processes.delete(handle);
    };
    handle.done.then(() => handle.waitForExit()).then(release, release);
    return handle;
  }

  /** Starts a process on a new terminal; `cwd` and `graceMs` may be left out, as for {@link spawn}. */
  async spawnTerminal(request: TerminalSpawnRequest, options: RemoteTerminalOptions = {}): Promise<RemoteTerminal> {
    this.#assertOpen();
    assertProgram(request?.argv, 'terminal argv must contain a program', invalid);
    const spec = terminalDefaults(request);
    assertSpawnSpec(spec, 'terminal argv must contain a program');
    spec.signal?.throwIfAborted();
    const info = await this.call('terminal.create', {
      argv: [...spec.argv],
      ...(spec.cwd === undefined ? {} : { cwd: spec.cwd }),
      ...(spec.env === undefined ? {} : { env: spec.env }),
      rows: spec.rows,
      cols: spec.cols,
      graceMs: spec.graceMs,
      ...(spec.user === undefined ? {} : { user: spec.user }),
      ...(spec.limits === undefined ? {} : { limits: { ...spec.limits } }),
      requestId: randomUUID(),
      ...(options.answerQueries === undefined ? {} : { answerQueries: options.answerQueries }),
    });
    const terminal = this.#own(new RemoteTerminal(this.#connection, info));
    if (spec.signal?.aborted === true) {
      // Aborted while allocating: the terminal was made, so it is ended, and the caller gets its reason.
      await terminal.terminate().catch(() => undefined);
      throw spec.signal.reason;
    }
    return terminal;
  }

  /**
   * Runs a command to completion and answers its exit, output and duration.
   * A string runs through the world's shell (`/bin/sh -c`; `cmd.exe /d /s /c`
   * on Windows), an argv array as it is. It is a `spawn` like any other, so it
   * is listed on the daemon while it runs; what it leaves running is ended
   * when it ends.
   * @throws {SpawnError} when the command could not start; the signal's reason when `options.signal` aborted.
   */
  async run(command: string | readonly string[], options: RunCommandOptions = {}): Promise<CommandResult> {
    this.#assertOpen();
    await this.start();
    return await runCommand((spec) => this.spawn(spec), this.platform, command, options, invalid);
  }

  /** The terminals this token's owner has on the daemon. */
  async listTerminals(): Promise<OperationResult<'terminal.list'>['terminals']> {
    return (await this.call('terminal.list', {})).terminals;
  }

  /** The processes this token's owner has on the daemon. */
  async listProcesses(): Promise<OperationResult<'process.list'>['processes']> {
    return (await this.call('process.list', {})).processes;
  }

  /**
   * A terminal's screen as the daemon's emulator draws it, at an exact output
   * offset (`offset`): attach from there to follow it with nothing lost or repeated.
   */
  async screen(id: string): Promise<TerminalScreen> {
    return await this.call('terminal.screen', { id });
  }

  /** A handle on a terminal that already runs, from another client or before a restart; output replays from `from`. */
  async attachTerminal(id: string, options: { from?: number } = {}): Promise<RemoteTerminal> {
    const info = await this.call('terminal.get', { id });
    return this.#own(new RemoteTerminal(this.#connection, info, options.from ?? info.output.start));
  }

  #own(terminal: RemoteTerminal): RemoteTerminal {
    this.#terminals.add(terminal);
    // Released once it ended and the daemon swept its session.
    terminal.done
      .then(() => terminal.terminate())
      .then(
        () => this.#terminals.delete(terminal),
        () => undefined,
      );
    return terminal;
  }

  #assertOpen(): void {
    if (this.#disposing !== undefined) throw new ConnectionError('CLOSED', 'the runtime has been disposed');
  }

  /**
   * Terminates every process tree and terminal this runtime started and has not
   * seen end, waits until they are gone, then closes the connection. Several
   * failures are reported as one AggregateError.
   */
  dispose(): Promise<void> {
    this.#disposing ??= (async () => {
      const failure = await settleAll(endAll(this.#processes, this.#terminals), 'remote subprocess teardown failed');
      this.#connection.close();
      this.#http?.close();
      if (failure !== undefined) throw failure.error;
    })();
    return this.#disposing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }

  /** Retained output of a terminal from a byte offset, with the gap when that offset is gone. */
  async readTerminalOutput(
    id: string,
    from: number,
    maxBytes?: number,
  ): Promise<{ from: number; next: number; data: Buffer; gap: { from: number; to: number } | null; ended: boolean }> {
    const read = await this.call('terminal.output', { id, from, ...(maxBytes === undefined ? {} : { maxBytes }) });
    return { ...read, data: Buffer.from(read.data, 'base64') };
  }

  /** The platform of the daemon's world (`linux`, `win32`, ...), known once the runtime started. */
  get platform(): NodeJS.Platform | undefined {
    return this.#health?.platform as NodeJS.Platform | undefined;
  }

  /**
   * Counts the calls sent and messages received on the connection: unchanged
   * between two reads, nothing was asked of the daemon or came from it meanwhile.
   */
  get traffic(): number {
    return this.#connection.traffic;
  }

  /** @internal Plain HTTP to the daemon, for the byte routes (file content). */
  get http(): RawHttp {
    this.#assertOpen();
    this.#http ??= new RawHttp({ url: this.url, headers: this.#options.headers, ca: this.#options.ca });
    return this.#http;
  }

  /** Closes the connection. Sessions on the daemon run on; calls still owed fail with CLOSED. */
  close(): void {
    this.#connection.close();
    this.#http?.close();
  }

  /** @internal The connection, for tests and benchmarks. */
  get connection(): Connection {
    return this.#connection;
  }
}

/**
 * Connects to a daemon and returns a {@link RemoteRuntime}, a drop-in for a
 * local subprocess provider.
 * @param url - the daemon, e.g. `http://127.0.0.1:7878`
 * @throws {ConnectionError} CONNECTION_FAILED, PROTOCOL_MISMATCH; {@link AuthError} for a refused token
 */
export async function connect(url: string, options: ConnectOptions = {}): Promise<RemoteRuntime> {
  const runtime = new RemoteRuntime(url, options);
  await runtime.start();
  return runtime;
}
