/**
 * The daemon's sessions: every terminal and process tree it runs, the owner of
 * each, their output streams, and how long their facts outlive them.
 *
 * A session's life is not a connection's: clients come and go, and a session
 * ends only by its own exit, a terminate, or shutdown. Once it has ended and
 * nothing of it runs any more, its exit facts and retained output are kept for
 * the retention period, so a late client still learns them.
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { schemas } from '@execworld/sdk/protocol';
import type { SubprocessOutcome, SubprocessOutputMode, SubprocessStdio } from '@execworld/sdk/seam';
import type { LocalRuntime } from '../provider/local-runtime.ts';
import type { RunAs } from '../provider/run-as.ts';
import type { ManagedProcess } from '../provider/process.ts';
import type { LocalTerminal } from '../provider/terminal.ts';
import { ServiceError, toServiceError } from './errors.ts';
import { InputSequencer } from './input-sequencer.ts';
import { CollectorStream, RingStream, type ByteStream } from './streams.ts';

type ProcessCreate = typeof schemas.ProcessCreate._zod.output;
type TerminalCreate = typeof schemas.TerminalCreate._zod.output;
type TerminalInfo = typeof schemas.TerminalInfo._zod.output;
type ProcessInfo = typeof schemas.ProcessInfo._zod.output;
type StreamInfo = typeof schemas.ProcessStreamInfo._zod.output;

export interface SessionLimits {
  readonly maxSessionsPerOwner: number;
  /** Bytes a process's stdin pipe holds for a program that does not read, before writes are refused. */
  readonly inputBacklogBytes: number;
  /** Collect-mode tails of every held process together, at most. */
  readonly collectBudgetBytes: number;
  readonly maxRetainedPerOwner: number;
  readonly ringBytes: number;
  readonly retentionMs: number;
  readonly orphanTimeoutMs: number;
}

/** How a session ended when the spawn itself failed, as the client sees it. */
export type SpawnFailure = ReturnType<ServiceError['body']>;

/** Feeds a readable into a ring, pausing it while the ring holds `capacity` unread bytes. */
function feed(source: Readable, ring: RingStream): void {
  source.on('data', (chunk: Buffer) => {
    ring.append(chunk);
    if (ring.full) source.pause();
  });
  ring.onChange(() => {
    if (!ring.full && source.isPaused() && !ring.ended) source.resume();
  });
  source.once('end', () => ring.finish());
  source.once('close', () => ring.finish());
  source.on('error', () => ring.finish());
}

const newId = (prefix: 't' | 'p'): string => `${prefix}_${randomBytes(12).toString('base64url')}`;

abstract class Session {
  readonly id: string;
  readonly owner: string;
  readonly createdAt = new Date();
  lastTouched = Date.now();
  /** Nothing of the session runs any more; its facts are only kept. */
  finishedAt: Date | undefined;
  /** Makes retried input writes idempotent, per writer. */
  protected readonly writes = new InputSequencer();
  protected readonly log: Logger;

  constructor(prefix: 't' | 'p', owner: string, log: Logger) {
    this.id = newId(prefix);
    this.owner = owner;
    this.log = log.child({ session: this.id });
  }

  abstract readonly kind: 'terminal' | 'process';
  /** Ends the session; resolves once nothing of it runs. */
  abstract terminate(): Promise<void>;

  /** Releases what the session holds outside memory once it is forgotten (spill files). */
  dispose(): void {
    // Nothing by default.
  }
}

export class TerminalSession extends Session {
  readonly kind = 'terminal' as const;
  readonly handle: LocalTerminal;
  readonly output: RingStream;
  readonly argv: readonly string[];
  readonly cwd: string;
  rows: number;
  cols: number;
  exit: SubprocessOutcome | undefined;
  exitedAt: Date | undefined;
  /** Settles once the terminal exited and its whole session was swept. */
  readonly settled: Promise<void>;

  constructor(owner: string, spec: TerminalCreate, handle: LocalTerminal, ringBytes: number, log: Logger, onFinished: () => void) {
    super('t', owner, log);
    this.handle = handle;
    this.argv = spec.argv;
    this.cwd = spec.cwd;
    this.rows = spec.rows;
    this.cols = spec.cols;
    this.output = new RingStream(ringBytes);
    feed(handle.output, this.output);
    this.settled = handle.done.then(async (outcome) => {
      this.exit = outcome;
      this.exitedAt = new Date();
      this.log.info({ exit: outcome }, 'terminal exited');
      // The callers waiting for the exit are answered first: the sweep scans the process table.
      await new Promise((resolve) => setImmediate(resolve));
      await this.#sweep();
      onFinished();
    });
  }

  async #sweep(): Promise<void> {
    for (;;) {
      try {
        await this.handle.terminate();
        this.finishedAt = new Date();
        return;
      } catch (error) {
        this.log.error({ err: error }, 'terminal session cleanup failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  async terminate(): Promise<void> {
    await this.handle.terminate();
    await this.settled;
  }

  /** Resolves once the kernel took the bytes; false when (`writer`, `seq`) shows a retry of an applied write. */
  input(data: string, writer: string | undefined, seq: number | undefined): Promise<boolean> {
    return this.writes.run(writer, seq, async () => {
      if (this.exit !== undefined) throw new ServiceError('TERMINAL_EXITED', 'the terminal has exited');
      await this.handle.write(data);
    });
  }

  resize(rows: number, cols: number): void {
    this.handle.resize(cols, rows);
    this.rows = rows;
    this.cols = cols;
  }

  info(): TerminalInfo {
    return {
      id: this.id,
      pid: this.handle.pid,
      argv: [...this.argv],
      cwd: this.cwd,
      rows: this.rows,
      cols: this.cols,
      status: this.exit === undefined ? 'running' : 'exited',
      exit: this.exit ?? null,
      closed: this.finishedAt !== undefined,
      createdAt: this.createdAt.toISOString(),
      exitedAt: this.exitedAt?.toISOString() ?? null,
      output: { start: this.output.start, end: this.output.end, ended: this.output.ended },
    };
  }
}

interface ProcessStream {
  readonly mode: 'pipe' | 'collect';
  readonly stream: RingStream | CollectorStream;
}

export class ProcessSession extends Session {
  readonly kind = 'process' as const;
  readonly handle: ManagedProcess;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly stdinMode: 'ignore' | 'pipe' | 'data';
  readonly streams: { stdout?: ProcessStream; stderr?: ProcessStream } = {};
  exit: SubprocessOutcome | undefined;
  failure: SpawnFailure | undefined;
  exitedAt: Date | undefined;
  #stdin: Writable | undefined;
  #stdinError: Error | undefined;
  readonly settled: Promise<void>;

  readonly #inputBacklogBytes: number;
  /** Bytes of the daemon-wide collect budget this session's collected tails hold. */
  readonly collectBytes: number;

  constructor(owner: string, spec: ProcessCreate, runtime: LocalRuntime, limits: SessionLimits, log: Logger, onFinished: () => void, runAs?: RunAs) {
    super('p', owner, log);
    const ringBytes = limits.ringBytes;
    this.#inputBacklogBytes = limits.inputBacklogBytes;
    this.argv = spec.argv;
    this.cwd = spec.cwd;
    const stdin = spec.stdio.stdin;
    this.stdinMode = typeof stdin === 'object' ? 'data' : stdin;
    this.collectBytes = collectBytesOf(spec);
    this.handle = runtime.spawn(
      { argv: spec.argv, cwd: spec.cwd, env: nullToUndefined(spec.env), stdio: seamStdio(spec.stdio), graceMs: spec.graceMs },
      { onCollected: (stream) => (this.streams[stream]?.stream as CollectorStream | undefined)?.appended(), runAs },
    );
    for (const name of ['stdout', 'stderr'] as const) {
      const mode = spec.stdio[name];
      if (mode === 'pipe') {
        const ring = new RingStream(ringBytes);
        const source = this.handle[name];
        if (source !== undefined) feed(source, ring);
        else ring.finish();
        this.streams[name] = { mode: 'pipe', stream: ring };
      } else {
        const collector = this.handle.collector(name);
        if (collector !== undefined) this.streams[name] = { mode: 'collect', stream: new CollectorStream(collector) };
      }
    }
    this.#stdin = this.handle.stdin;
    this.#stdin?.on('error', (error) => {
      // EPIPE from a child that stopped reading: later writes are refused, the daemon lives on.
      this.#stdinError ??= error;
    });
    this.settled = this.handle.done.then(
      (outcome) => {
        this.exit = outcome;
      },
      (error: unknown) => {
        this.failure = toServiceError(error).body();
      },
    ).then(async () => {
      this.exitedAt = new Date();
      for (const entry of Object.values(this.streams)) if (entry.mode === 'collect') (entry.stream as CollectorStream).finish();
      this.log.info({ exit: this.exit, failure: this.failure }, 'process ended');
      await this.handle.waitForExit();
      this.finishedAt = new Date();
      onFinished();
    });
  }

  stream(name: 'stdout' | 'stderr'): ByteStream {
    const entry = this.streams[name];
    if (entry === undefined) throw new ServiceError('STREAM_NOT_AVAILABLE', `${name} was not spawned as 'pipe' or collect`);
    return entry.stream;
  }

  /** Resolves once the pipe took the bytes; false when (`writer`, `seq`) shows a retry of an applied write. */
  writeStdin(data: Buffer, writer: string | undefined, seq: number | undefined): Promise<boolean> {
    return this.writes.run(writer, seq, async () => {
      const stdin = this.#stdinOrThrow();
      const waiting = stdin.writableLength;
      if (waiting > 0 && waiting + data.length > this.#inputBacklogBytes) {
        throw new ServiceError('LIMIT_EXCEEDED', `the process is not reading its stdin: ${waiting} bytes already wait (the limit is ${this.#inputBacklogBytes})`);
      }
      await new Promise<void>((resolve, reject) => {
        stdin.write(data, (error) => (error === null || error === undefined ? resolve() : reject(new ServiceError('PROCESS_EXITED', `stdin write failed: ${error.message}`))));
      });
    });
  }

  /** Closes the stdin pipe; closing it again is success, as the first close's retry may be. */
  closeStdin(): void {
    const stdin = this.#stdin;
    if (stdin !== undefined && stdin.writableEnded && this.#stdinError === undefined) return;
    this.#stdinOrThrow().end();
  }

  #stdinOrThrow(): Writable {
    const stdin = this.#stdin;
    if (stdin === undefined) throw new ServiceError('PROCESS_EXITED', `stdin is not a pipe (it was spawned as ${this.stdinMode})`);
    if (this.#stdinError !== undefined) throw new ServiceError('PROCESS_EXITED', `stdin is closed: ${this.#stdinError.message}`);
    if (stdin.writableEnded || stdin.destroyed) throw new ServiceError('PROCESS_EXITED', 'stdin is closed');
    return stdin;
  }

  async terminate(): Promise<void> {
    this.handle.terminate();
    await this.settled;
  }

  override dispose(): void {
    for (const name of ['stdout', 'stderr'] as const) this.handle.collector(name)?.discard();
  }

  info(): ProcessInfo {
    const stream = (name: 'stdout' | 'stderr'): StreamInfo | null => {
      const entry = this.streams[name];
      if (entry === undefined) return null;
      const spillPath = entry.mode === 'collect' ? (this.handle.collector(name)?.spillPath ?? null) : null;
      return { mode: entry.mode, start: entry.stream.start, end: entry.stream.end, ended: entry.stream.ended, spillPath };
    };
    const stdin = this.#stdin;
    return {
      id: this.id,
      pid: this.handle.pid,
      argv: [...this.argv],
      cwd: this.cwd,
      status: this.failure !== undefined ? 'failed' : this.exit !== undefined ? 'exited' : 'running',
      exit: this.exit ?? null,
      error: this.failure ?? null,
      treeExited: this.handle.treeExited,
      stdin: this.stdinMode,
      stdinOpen: stdin !== undefined && !stdin.writableEnded && !stdin.destroyed && this.#stdinError === undefined,
      stdout: stream('stdout'),
      stderr: stream('stderr'),
      createdAt: this.createdAt.toISOString(),
      exitedAt: this.exitedAt?.toISOString() ?? null,
    };
  }
}

/** The memory a process's collected tails may take: their maxBytes together. */
function collectBytesOf(spec: ProcessCreate): number {
  const of = (mode: ProcessCreate['stdio']['stdout']): number => (mode === 'pipe' ? 0 : mode.maxBytes);
  return of(spec.stdio.stdout) + of(spec.stdio.stderr);
}

/** The wire's stdio in the seam's shape (an absent spill is no key at all). */
function seamStdio(stdio: ProcessCreate['stdio']): SubprocessStdio {
  const output = (mode: ProcessCreate['stdio']['stdout']): SubprocessOutputMode =>
    mode === 'pipe' ? 'pipe' : { maxBytes: mode.maxBytes, ...(mode.spill === undefined ? {} : { spill: { maxBytes: mode.spill.maxBytes } }) };
  return { stdin: stdio.stdin, stdout: output(stdio.stdout), stderr: output(stdio.stderr) };
}

function nullToUndefined(env: Readonly<Record<string, string | null>> | undefined): NodeJS.ProcessEnv | undefined {
  if (env === undefined) return undefined;
  return Object.fromEntries(Object.entries(env).map(([name, value]) => [name, value ?? undefined]));
}

export type AnySession = TerminalSession | ProcessSession;

export class SessionRegistry {
  readonly runtime: LocalRuntime;
  readonly #limits: SessionLimits;
  readonly #log: Logger;
  readonly #sessions = new Map<string, AnySession>();
  /** `owner\0requestId` → the creation it started, so a retried create returns the same session. */
  readonly #requests = new Map<string, Promise<AnySession>>();
  readonly #requestOf = new Map<string, string>();
  readonly #evictions = new Map<string, NodeJS.Timeout>();
  /** Collect-mode bytes (maxBytes) of the processes held, against collectBudgetBytes. */
  #collectReserved = 0;
  /** Per owner, creates under way: they hold a slot before their session exists. */
  readonly #reserved = new Map<string, number>();
  #orphanSweep: NodeJS.Timeout | undefined;
  #shuttingDown: Promise<void> | undefined;

  readonly #runAsOf: (owner: string) => RunAs | undefined;

  /** @param runAsOf - the OS user an owner's programs run as, if not the daemon's own. */
  constructor(runtime: LocalRuntime, limits: SessionLimits, log: Logger, runAsOf: (owner: string) => RunAs | undefined = () => undefined) {
    this.runtime = runtime;
    this.#runAsOf = runAsOf;
    this.#limits = limits;
    this.#log = log;
    if (limits.orphanTimeoutMs > 0) {
      this.#orphanSweep = setInterval(() => this.#sweepOrphans(), Math.min(60_000, Math.max(100, limits.orphanTimeoutMs / 4)));
      this.#orphanSweep.unref();
    }
  }

  get size(): number {
    return this.#sessions.size;
  }

  createTerminal(owner: string, spec: TerminalCreate): Promise<TerminalSession> {
    return this.#once(owner, spec.requestId, 'terminal', async () => {
      // The slot is held from before the spawn's await until the session is registered:
      // creates pipelined on one connection cannot all pass the count.
      const release = this.#admit(owner);
      try {
        const handle = await this.runtime.spawnTerminal(spec, { runAs: this.#runAsOf(owner) });
        const session: TerminalSession = new TerminalSession(owner, spec, handle, this.#limits.ringBytes, this.#log, () => this.#finished(session));
        this.#sessions.set(session.id, session);
        this.#log.info({ session: session.id, owner, pid: handle.pid }, 'terminal started');
        return session;
      } finally {
        release();
      }
    });
  }

  createProcess(owner: string, spec: ProcessCreate): Promise<ProcessSession> {
    return this.#once(owner, spec.requestId, 'process', async () => {
      const release = this.#admit(owner);
      const wanted = collectBytesOf(spec);
      if (wanted > 0 && this.#collectReserved + wanted > this.#limits.collectBudgetBytes) {
        release();
        throw new ServiceError(
          'LIMIT_EXCEEDED',
          `collected output of running and retained processes already holds ${this.#collectReserved} of the daemon's ${this.#limits.collectBudgetBytes} bytes; this process asks for ${wanted}`,
        );
      }
      // Held from before the spawn's await, like the session slot: concurrent creates cannot all pass the budget.
      this.#collectReserved += wanted;
      let registered = false;
      try {
        const session: ProcessSession = new ProcessSession(owner, spec, this.runtime, this.#limits, this.#log, () => this.#finished(session), this.#runAsOf(owner));
        // Answered once the program runs or was refused, like a terminal: a refused spawn is this create's error and takes no slot.
        await session.handle.spawned;
        this.#sessions.set(session.id, session);
        registered = true;
        this.#log.info({ session: session.id, owner, pid: session.handle.pid }, 'process started');
        return session;
      } finally {
        release();
        if (!registered) this.#collectReserved -= wanted;
      }
    });
  }

  /**
   * Runs a create once per (owner, requestId): a retry, even one that arrives
   * while the first is still running, gets the same session. A create that failed
   * may be retried for real.
   */
  async #once<S extends AnySession>(owner: string, requestId: string | undefined, kind: S['kind'], create: () => Promise<S>): Promise<S> {
    if (requestId === undefined) return create();
    const key = `${owner}\0${requestId}`;
    const known = this.#requests.get(key);
    if (known !== undefined) {
      const session = await known;
      if (session.kind !== kind) throw new ServiceError('INVALID_ARGUMENT', `requestId ${requestId} already created a ${session.kind}`);
      return session as S;
    }
    const creation = create();
    this.#requests.set(key, creation);
    creation.then(
      (session) => this.#requestOf.set(session.id, key),
      () => this.#requests.delete(key),
    );
    return creation;
  }

  /** The owner's session `id`; another owner's id is as unknown as a missing one. */
  get<K extends AnySession['kind']>(owner: string, id: string, kind: K): Extract<AnySession, { kind: K }> {
    const session = this.#sessions.get(id);
    if (session === undefined || session.owner !== owner || session.kind !== kind) {
      throw new ServiceError('NOT_FOUND', `no ${kind} ${id}`);
    }
    session.lastTouched = Date.now();
    return session as Extract<AnySession, { kind: K }>;
  }

  list<K extends AnySession['kind']>(owner: string, kind: K): Extract<AnySession, { kind: K }>[] {
    return [...this.#sessions.values()].filter((session): session is Extract<AnySession, { kind: K }> => session.owner === owner && session.kind === kind);
  }

  /** Terminates the session if it still runs, then forgets it. */
  async delete(owner: string, id: string, kind: AnySession['kind']): Promise<void> {
    const session = this.get(owner, id, kind);
    await session.terminate();
    this.#forget(session.id);
  }

  /** Stops taking work, terminates every session and waits until nothing runs. */
  shutdown(): Promise<void> {
    this.#shuttingDown ??= (async () => {
      clearInterval(this.#orphanSweep);
      const results = await Promise.allSettled([...this.#sessions.values()].map((session) => session.terminate()));
      for (const result of results) if (result.status === 'rejected') this.#log.error({ err: result.reason }, 'session cleanup failed at shutdown');
      await this.runtime.dispose().catch((error: unknown) => this.#log.error({ err: error }, 'runtime disposal failed'));
      // Nothing is kept past the daemon's life: spill files go with their sessions.
      for (const id of [...this.#sessions.keys()]) this.#forget(id);
    })();
    return this.#shuttingDown;
  }

  /** Reserves one of the owner's session slots; the returned function gives the reservation back. */
  #admit(owner: string): () => void {
    if (this.#shuttingDown !== undefined) throw new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down');
    const reserved = this.#reserved.get(owner) ?? 0;
    const running = [...this.#sessions.values()].filter((session) => session.owner === owner && session.finishedAt === undefined).length + reserved;
    if (running >= this.#limits.maxSessionsPerOwner) {
      throw new ServiceError('LIMIT_EXCEEDED', `owner ${owner} already runs ${running} terminals and processes (the limit is ${this.#limits.maxSessionsPerOwner})`);
    }
    this.#reserved.set(owner, reserved + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#reserved.get(owner) ?? 1) - 1;
      if (left === 0) this.#reserved.delete(owner);
      else this.#reserved.set(owner, left);
    };
  }

  #finished(session: AnySession): void {
    if (!this.#sessions.has(session.id) || this.#shuttingDown !== undefined) return;
    const timer = setTimeout(() => this.#forget(session.id), this.#limits.retentionMs);
    timer.unref();
    this.#evictions.set(session.id, timer);
    const retained = [...this.#sessions.values()]
      .filter((other) => other.owner === session.owner && other.finishedAt !== undefined)
      .sort((a, b) => a.finishedAt!.getTime() - b.finishedAt!.getTime());
    for (const old of retained.slice(0, Math.max(0, retained.length - this.#limits.maxRetainedPerOwner))) this.#forget(old.id);
  }

  #forget(id: string): void {
    clearTimeout(this.#evictions.get(id));
    this.#evictions.delete(id);
    const session = this.#sessions.get(id);
    if (session === undefined) return;
    this.#sessions.delete(id);
    if (session.kind === 'process') this.#collectReserved -= session.collectBytes;
    session.dispose();
    const request = this.#requestOf.get(id);
    if (request !== undefined) {
      this.#requests.delete(request);
      this.#requestOf.delete(id);
    }
  }

  #sweepOrphans(): void {
    const cutoff = Date.now() - this.#limits.orphanTimeoutMs;
    for (const session of this.#sessions.values()) {
      if (session.finishedAt === undefined && session.lastTouched < cutoff) {
        this.#log.warn({ session: session.id }, 'terminating a session nobody touched within the orphan timeout');
        session.terminate().catch((error: unknown) => this.#log.error({ err: toServiceError(error) }, 'orphan cleanup failed'));
      }
    }
  }
}
