/**
 * A process session: the provider's managed process tree, its stdin pipe, and
 * its stdout and stderr as streams (a ring for piped output, a view of the
 * bounded tail for collected output).
 * @module
 */
import { Writable } from 'node:stream';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { schemas } from '@execworld/sdk/protocol';
import type { SubprocessOutcome, SubprocessOutputMode, SubprocessSpawnSpec } from '@execworld/sdk/seam';
import { ProviderError, type ProviderProcess } from '../../provider/api.ts';
import { ServiceError, toServiceError } from '../errors.ts';
import { CollectorStream, feedRing, RingStream, type ByteStream, type StreamMeter } from '../streams.ts';
import { restoreRing, ringRecord, type ProcessRecord } from '../takeover-state.ts';
import { Session } from './session.ts';

type ProcessInfo = typeof schemas.ProcessInfo._zod.output;
type StreamInfo = typeof schemas.ProcessStreamInfo._zod.output;

/** How a session ended when the spawn itself failed, as the client sees it. */
export type SpawnFailure = ReturnType<ServiceError['body']>;

type StreamName = 'stdout' | 'stderr';

interface ProcessStream {
  readonly mode: 'pipe' | 'collect';
  readonly stream: RingStream | CollectorStream;
}

export interface ProcessSessionOptions {
  readonly ringBytes: number;
  /** Where the output rings report what they take and drop. */
  readonly meter?: StreamMeter | undefined;
  /** Called once nothing of the session runs. */
  readonly onFinished: () => void;
  /** A session the previous image of the daemon handed over (a takeover): its id, creation time, rings, writers and end. */
  readonly kept?: ProcessRecord | undefined;
}

/** The memory a process's collected tails may take: their maxBytes together. */
export function collectBytesOf(spec: SubprocessSpawnSpec): number {
  const of = (mode: SubprocessOutputMode): number => (typeof mode === 'object' ? mode.maxBytes : 0);
  return of(spec.stdio.stdout) + of(spec.stdio.stderr);
}

export class ProcessSession extends Session {
  readonly kind = 'process' as const;
  readonly handle: ProviderProcess;
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

  /** The maxBytes of this session's collected tails together: what they may grow to while the program runs. */
  readonly collectBytes: number;
  /** Set once the collected streams ended: no byte is added to their tails after it. */
  #collectEnded = false;
  /** A command.run's process: it ends when its caller goes away (see command-run.ts). */
  endsWithCaller = false;
  readonly #graceMs: number;
  readonly #stdio: ProcessRecord['stdio'];

  /** @param handle - the process tree, started from `spec`; its collected chunks are announced by {@link collected}. */
  constructor(owner: string, spec: SubprocessSpawnSpec, handle: ProviderProcess, options: ProcessSessionOptions, log: Logger) {
    const kept = options.kept;
    super('p', owner, log, kept === undefined ? undefined : { id: kept.id, createdAt: new Date(kept.createdAt) });
    this.argv = spec.argv;
    this.#graceMs = spec.graceMs;
    const modeOf = (name: StreamName): 'pipe' | 'inherit' => (spec.stdio[name] === 'inherit' ? 'inherit' : 'pipe');
    this.cwd = spec.cwd;
    const stdin = spec.stdio.stdin;
    this.stdinMode = typeof stdin === 'object' ? 'data' : stdin;
    this.#stdio = { stdin: this.stdinMode, stdout: modeOf('stdout'), stderr: modeOf('stderr') };
    this.collectBytes = collectBytesOf(spec);
    this.handle = handle;
    for (const name of ['stdout', 'stderr'] as const) {
      const mode = spec.stdio[name];
      if (mode === 'pipe') {
        const ring = new RingStream(options.ringBytes, options.meter);
        const restored = kept?.rings[name];
        if (restored !== undefined) restoreRing(ring, restored);
        const source = this.handle[name];
        if (source !== undefined) feedRing(source, ring);
        else ring.finish();
        this.streams[name] = { mode: 'pipe', stream: ring };
      } else {
        const collector = this.handle.collector(name);
        if (collector !== undefined) this.streams[name] = { mode: 'collect', stream: new CollectorStream(collector) };
      }
    }
    // A stdin pipe closed before a takeover stays one, closed.
    this.#stdin = this.handle.stdin ?? (kept !== undefined && this.stdinMode === 'pipe' ? closedPipe() : undefined);
    if (kept !== undefined) this.writes.restore(kept.writers);
    this.#stdin?.on('error', (error) => {
      // EPIPE from a child that stopped reading: later writes are refused, the daemon lives on.
      this.#stdinError ??= error;
    });
    this.settled = this.handle.done
      .then(
        (outcome) => {
          this.exit = outcome;
        },
        (error: unknown) => {
          this.failure = toServiceError(error).body();
        },
      )
      .then(async () => {
        this.exitedAt = kept?.ended === undefined ? new Date() : new Date(kept.ended.exitedAt);
        for (const entry of Object.values(this.streams)) if (entry.mode === 'collect') (entry.stream as CollectorStream).finish();
        // The provider closed the collected pipes as done settled: the tails are final.
        this.#collectEnded = true;
        this.log.info({ exit: this.exit, failure: this.failure }, 'process ended');
        await this.handle.waitForExit();
        this.finishedAt = kept?.ended === undefined ? new Date() : new Date(kept.ended.finishedAt);
        options.onFinished();
      });
  }

  /** A collected stream took a chunk: readers waiting for it are told. */
  collected(name: StreamName): void {
    (this.streams[name]?.stream as CollectorStream | undefined)?.appended();
  }

  stream(name: StreamName): ByteStream {
    const entry = this.streams[name];
    if (entry === undefined) throw new ServiceError('STREAM_NOT_AVAILABLE', `${name} was not spawned as 'pipe' or collect`);
    return entry.stream;
  }

  /**
   * Resolves once the pipe took the bytes; false when (`writer`, `seq`) shows a retry of an applied write.
   * The provider bounds what waits for a program that does not read (LIMIT_EXCEEDED), as for a terminal.
   */
  writeStdin(data: Buffer, writer: string | undefined, seq: number | undefined): Promise<boolean> {
    return this.writes.run(writer, seq, async () => {
      this.#stdinOrThrow();
      await this.handle.writeStdin(data).catch((error: unknown) => {
        throw error instanceof ProviderError ? error : new ServiceError('PROCESS_EXITED', `stdin write failed: ${(error as Error).message}`);
      });
    });
  }

  /**
   * Closes the stdin pipe. A pipe that is closed already is success: closed
   * by a first close (which a retry repeats), or gone with the process, as a
   * local close of a pipe whose reader exited is. Only a stdin that was never
   * a pipe is an error.
   */
  closeStdin(): void {
    const stdin = this.#pipeOrThrow();
    if (stdin.writableEnded || stdin.destroyed || this.#stdinError !== undefined) return;
    stdin.end();
  }

  #pipeOrThrow(): Writable {
    if (this.#stdin === undefined) throw new ServiceError('PROCESS_EXITED', `stdin is not a pipe (it was spawned as ${this.stdinMode})`);
    return this.#stdin;
  }

  #stdinOrThrow(): Writable {
    const stdin = this.#pipeOrThrow();
    if (this.#stdinError !== undefined) throw new ServiceError('PROCESS_EXITED', `stdin is closed: ${this.#stdinError.message}`);
    if (stdin.writableEnded || stdin.destroyed) throw new ServiceError('PROCESS_EXITED', 'stdin is closed');
    return stdin;
  }

  /**
   * What the next image of the daemon needs to rebuild this session, for a
   * takeover: `process` is what its provider handed over (it no longer reads
   * the pipes), undefined for one that ended. Every byte read from the pipes
   * is in the rings by now.
   */
  takeoverRecord(process: ProcessRecord['process']): ProcessRecord {
    const rings: ProcessRecord['rings'] = {};
    for (const name of ['stdout', 'stderr'] as const) {
      const ring = this.streams[name]?.stream;
      if (ring instanceof RingStream) rings[name] = ringRecord(ring);
    }
    return {
      ...this.keptFacts(),
      pid: this.handle.pid,
      stdio: this.#stdio,
      graceMs: this.#graceMs,
      rings,
      endsWithCaller: this.endsWithCaller,
      ...(process === undefined ? {} : { process }),
    };
  }

  /** Whether a stream is collected (stdio maxBytes): such a process is not handed over by a takeover. */
  get collects(): boolean {
    return Object.values(this.streams).some((entry) => entry.mode === 'collect');
  }

  async terminate(): Promise<void> {
    this.handle.terminate();
    await this.settled;
  }

  /**
   * Bytes of the daemon-wide collect budget this session holds: its tails'
   * maxBytes while they may still grow, then only what they retain. A tail
   * stays readable until the session is forgotten, so its bytes stay counted;
   * the room it never filled goes back when its streams end. (A tail's oldest
   * chunk may keep the memory of bytes it dropped: at most one pipe read.)
   */
  get collectHeld(): number {
    if (!this.#collectEnded) return this.collectBytes;
    let bytes = 0;
    for (const name of ['stdout', 'stderr'] as const) {
      const collector = this.streams[name]?.mode === 'collect' ? this.handle.collector(name) : undefined;
      if (collector !== undefined) bytes += collector.totalBytes - collector.windowStart;
    }
    return bytes;
  }

  /** The piped streams' rings; collected output is the provider's, in its own budget. */
  retainedBytes(): number {
    let bytes = 0;
    for (const entry of Object.values(this.streams)) if (entry.stream instanceof RingStream) bytes += entry.stream.retained;
    return bytes;
  }

  override dispose(): void {
    for (const name of ['stdout', 'stderr'] as const) this.handle.collector(name)?.discard();
  }

  info(): ProcessInfo {
    const stream = (name: StreamName): StreamInfo | null => {
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
      ...this.accounting(this.handle.usage?.()),
    };
  }
}

/** A stdin pipe that was closed: writes are refused as to any closed stdin, and a close is a success. */
function closedPipe(): Writable {
  const pipe = new Writable({ write: (_chunk, _encoding, callback) => callback() });
  pipe.destroy();
  return pipe;
}

/**
 * The handle of a process that had ended, and whose tree was gone, before a
 * takeover: nothing of it runs, its pipes ended, and `done` answers how it ended.
 */
export class EndedProcess implements ProviderProcess {
  readonly pid: number;
  readonly stdin = undefined;
  readonly stdout = undefined;
  readonly stderr = undefined;
  readonly collected = {};
  readonly done: Promise<SubprocessOutcome>;
  readonly treeExited = true;

  constructor(pid: number, exit: SubprocessOutcome) {
    this.pid = pid;
    this.done = Promise.resolve(exit);
  }

  collector(): undefined {
    return undefined;
  }
  writeStdin(): Promise<void> {
    return Promise.reject(new ServiceError('PROCESS_EXITED', 'the process has exited'));
  }
  terminate(): void {
    // Nothing runs.
  }
  waitForExit(): Promise<boolean> {
    return Promise.resolve(true);
  }
}
