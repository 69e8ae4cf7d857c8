/**
 * A managed process tree on the daemon, behind the seam's process handle.
 *
 * `spawn` must return at once, before the daemon has answered, so the handle
 * starts with `pid` -1 and the create call in flight. `pid` becomes the real
 * pid as soon as the daemon acknowledged the spawn (see {@link RemoteProcess.started});
 * every stream, `done`, `terminate` and `waitForExit` wait for that first.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import type { SubprocessCollectedOutputs, SubprocessHandle, SubprocessOutcome, SubprocessOutputMode, SubprocessSpawnSpec } from '../seam/types.ts';
import type { OperationResult } from '../protocol/operations.ts';
import { MAX_WAIT_MS } from '../seam/limits.ts';
import type { SessionLimits, SessionUsage, UsageReporting } from '../seam/usage.ts';
import { remoteError } from '../errors.ts';
import type { Connection, Logger } from './connection.ts';
import { RemoteCollector, RemoteStdin, SubscribedReadable } from './streams.ts';

type ProcessInfo = OperationResult<'process.get'>;

function wireOutput(mode: SubprocessOutputMode): 'pipe' | { maxBytes: number; spill?: { maxBytes: number } } {
  // 'inherit' means the SDK host's own fd here: the daemon pipes it, the SDK copies it out.
  if (mode === 'pipe' || mode === 'inherit') return 'pipe';
  return mode.spill === undefined ? { maxBytes: mode.maxBytes } : { maxBytes: mode.maxBytes, spill: { maxBytes: mode.spill.maxBytes } };
}

function wireEnv(env: NodeJS.ProcessEnv | undefined): Record<string, string | null> | undefined {
  if (env === undefined) return undefined;
  // JSON has no undefined: a tombstone crosses the wire as null.
  return Object.fromEntries(Object.entries(env).map(([name, value]) => [name, value ?? null]));
}

export class RemoteProcess implements SubprocessHandle, UsageReporting {
  readonly stdin: Writable | undefined;
  readonly stdout: Readable | undefined;
  readonly stderr: Readable | undefined;
  readonly collected: SubprocessCollectedOutputs;
  readonly done: Promise<SubprocessOutcome>;
  /** Resolves with the daemon's facts once the spawn was acknowledged; rejects when the daemon refused it. */
  readonly started: Promise<ProcessInfo>;
  readonly #connection: Connection;
  readonly #log: Logger | undefined;
  #info: ProcessInfo | undefined;
  #usage: SessionUsage | undefined;
  /** Names this handle's writes: sequence numbers are counted per writer. */
  readonly #writer = randomUUID();
  #seq = 0;
  #treeExited = false;
  #terminateRequested = false;

  /** @internal Made by RemoteRuntime.spawn; without `cwd` the daemon picks the world's. */
  constructor(
    connection: Connection,
    spec: Omit<SubprocessSpawnSpec, 'cwd'> & { cwd?: string | undefined; user?: string | undefined; limits?: SessionLimits | undefined },
    log: Logger | undefined,
  ) {
    this.#connection = connection;
    this.#log = log;
    const stdio = spec.stdio;
    this.started = connection.call('process.create', {
      argv: [...spec.argv],
      ...(spec.cwd === undefined ? {} : { cwd: spec.cwd }),
      ...(spec.env === undefined ? {} : { env: wireEnv(spec.env) }),
      stdio: { stdin: stdio.stdin, stdout: wireOutput(stdio.stdout), stderr: wireOutput(stdio.stderr) },
      graceMs: spec.graceMs,
      ...(spec.user === undefined ? {} : { user: spec.user }),
      ...(spec.limits === undefined ? {} : { limits: { ...spec.limits } }),
      // The request id makes the create safe to send again after a reconnect.
      requestId: randomUUID(),
    });
    this.started.then(
      (info) => (this.#info = info),
      () => undefined,
    );

    this.stdin =
      stdio.stdin === 'pipe'
        ? new RemoteStdin(
            async (chunk) => {
              const { id } = await this.started;
              this.#seq += 1;
              await connection.call('process.stdin', { id, data: chunk.toString('base64'), encoding: 'base64', writer: this.#writer, seq: this.#seq });
            },
            async () => {
              const { id } = await this.started;
              await connection.call('process.closeStdin', { id });
            },
          )
        : undefined;
    this.stdout = this.#pipe('stdout', stdio.stdout);
    this.stderr = this.#pipe('stderr', stdio.stderr);
    const collectors: { stdout?: RemoteCollector; stderr?: RemoteCollector } = {};
    for (const name of ['stdout', 'stderr'] as const) {
      const mode = stdio[name];
      if (typeof mode !== 'object') continue;
      const collector = new RemoteCollector(mode.maxBytes);
      this.started.then(
        (info) => collector.attach(connection, { kind: 'process', id: info.id, stream: name }),
        () => collector.abandon(),
      );
      collectors[name] = collector;
    }
    this.collected = collectors;
    this.done = this.#settle(collectors);
    this.done.catch(() => undefined);

    const abort = spec.signal;
    if (abort !== undefined) {
      const onAbort = (): void => this.terminate();
      abort.addEventListener('abort', onAbort, { once: true });
      this.done.then(
        () => abort.removeEventListener('abort', onAbort),
        () => abort.removeEventListener('abort', onAbort),
      );
    }
  }

  /** Pid of the tree root: -1 until the daemon acknowledged the spawn, and for a spawn that failed. */
  get pid(): number {
    return this.#info?.pid ?? -1;
  }

  /**
   * What the process tree used, as the daemon's done answer said: undefined
   * until `done` settled, and where the daemon's cell keeps no counters. The
   * daemon's process info (`process.get`) reads it while it runs.
   */
  usage(): SessionUsage | undefined {
    return this.#usage;
  }

  /** The daemon's id of this process, once started. */
  get id(): string | undefined {
    return this.#info?.id;
  }

  #pipe(name: 'stdout' | 'stderr', mode: SubprocessOutputMode): Readable | undefined {
    if (mode !== 'pipe' && mode !== 'inherit') return undefined;
    // The stream exists at once and fills once the daemon acknowledged the spawn.
    const stream = new PassThrough({ highWaterMark: 64 * 1024 });
    this.started.then(
      (info) => {
        const source = new SubscribedReadable(this.#connection, { kind: 'process', id: info.id, stream: name }, 0);
        source.on('error', (error) => stream.destroy(error));
        // Closed without its end (the runtime was closed): close the handed-out stream too, quietly.
        source.once('close', () => {
          if (!source.readableEnded && !source.errored) stream.destroy();
        });
        source.pipe(stream);
      },
      () => stream.end(),
    );
    if (mode === 'inherit') {
      const target = name === 'stdout' ? process.stdout : process.stderr;
      stream.pipe(target, { end: false });
      return undefined;
    }
    return stream;
  }

  async #settle(collectors: { stdout?: RemoteCollector; stderr?: RemoteCollector }): Promise<SubprocessOutcome> {
    const info = await this.started;
    const result = await this.#connection.call('process.done', { id: info.id });
    this.#usage = result.usage;
    // Collected readers hold every byte before done resolves, so readFrom(0) is the batch result.
    const replicas = Object.entries(collectors) as ['stdout' | 'stderr', RemoteCollector][];
    await Promise.all(replicas.map(([, replica]) => replica.ended));
    if (replicas.length > 0) {
      const final = await this.#connection.call('process.get', { id: info.id });
      for (const [name, replica] of replicas) replica.spillPath = final[name]?.spillPath ?? undefined;
    }
    // The daemon refuses a failed spawn at create, so `started` rejected already; a daemon that reports it here instead gets the same class.
    if (result.error !== null) throw remoteError(result.error);
    return toOutcome(result.exit);
  }

  terminate(): void {
    if (this.#terminateRequested || this.#treeExited) return;
    this.#terminateRequested = true;
    this.started
      .then((info) => this.#connection.call('process.terminate', { id: info.id }))
      .catch((error: unknown) => this.#log?.warn({ err: error }, 'execworld terminate failed'));
  }

  async waitForExit(signal?: AbortSignal): Promise<boolean> {
    if (this.#treeExited) return true;
    if (signal?.aborted === true) return false;
    let info: ProcessInfo;
    try {
      info = await this.started;
    } catch (_error) {
      // A spawn that never started has no tree.
      this.#treeExited = true;
      return true;
    }
    // One wait call waits at most MAX_WAIT_MS; a longer wait is a loop of them.
    while (!isAborted(signal)) {
      const wait = this.#connection.call('process.wait', { id: info.id, timeoutMs: MAX_WAIT_MS });
      const result = signal === undefined ? await wait : await Promise.race([wait, aborted(signal)]);
      if (result === undefined) return false;
      if (result.treeExited) {
        this.#treeExited = true;
        return true;
      }
    }
    return false;
  }
}

/** The daemon's outcome in the seam's type: its signal names are Node's. */
export function toOutcome(exit: { exitCode: number | null; signal: string | null } | null): SubprocessOutcome {
  return { exitCode: exit?.exitCode ?? null, signal: (exit?.signal ?? null) as NodeJS.Signals | null };
}

const isAborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;

function aborted(signal: AbortSignal): Promise<undefined> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined), { once: true }));
}
