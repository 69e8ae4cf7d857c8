/**
 * A terminal session: the provider's terminal, its output ring, its screen
 * (see terminal-screen.ts), and the sweep that ends whatever its program left
 * behind once it exited.
 * @module
 */
import { Readable } from 'node:stream';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { schemas } from '@execworld/sdk/protocol';
import type { SubprocessOutcome, SubprocessTerminalSpawnSpec } from '@execworld/sdk/seam';
import type { ProviderTerminal } from '../../provider/api.ts';
import { ServiceError } from '../errors.ts';
import { feedRing, RingStream, type StreamMeter } from '../streams.ts';
import { Session } from './session.ts';
import { restoreRing, ringRecord, type TerminalRecord } from '../takeover-state.ts';
import { TerminalScreen } from './terminal-screen.ts';

type TerminalInfo = typeof schemas.TerminalInfo._zod.output;

/**
 * Pauses between the automatic attempts to sweep an exited terminal's session
 * (end what its program left running). After the last one the session is left
 * unfinished, holding its owner's slot, and is swept again only when someone
 * terminates it: a client, the orphan sweep or shutdown.
 */
export const SWEEP_RETRY_DELAYS_MS: readonly number[] = [1_000, 2_000, 4_000, 8_000];

export interface TerminalSessionOptions {
  readonly ringBytes: number;
  /** Where the output ring reports what it takes and drops. */
  readonly meter?: StreamMeter | undefined;
  /** Whether the daemon answers the queries the terminal's program sends (cursor position, device attributes, …). */
  readonly answerQueries: boolean;
  /** The most cells (rows × cols) a screen is kept for. */
  readonly screenMaxCells: number;
  /** @default SWEEP_RETRY_DELAYS_MS */
  readonly sweepRetryDelaysMs?: readonly number[] | undefined;
  /** Called once nothing of the session runs. */
  readonly onFinished: () => void;
  /** A session the previous image of the daemon handed over (a takeover): its id, creation time, ring and writers. */
  readonly kept?: TerminalRecord | undefined;
}

export class TerminalSession extends Session {
  readonly kind = 'terminal' as const;
  readonly handle: ProviderTerminal;
  readonly output: RingStream;
  readonly screen: TerminalScreen;
  readonly answerQueries: boolean;
  readonly argv: readonly string[];
  readonly cwd: string;
  rows: number;
  cols: number;
  exit: SubprocessOutcome | undefined;
  exitedAt: Date | undefined;
  /** Settles once the terminal exited and the automatic sweep of its session ended, swept or given up. */
  readonly settled: Promise<void>;
  readonly #onFinished: () => void;

  constructor(owner: string, spec: SubprocessTerminalSpawnSpec, handle: ProviderTerminal, options: TerminalSessionOptions, log: Logger) {
    super('t', owner, log, options.kept === undefined ? undefined : { id: options.kept.id, createdAt: new Date(options.kept.createdAt) });
    this.handle = handle;
    this.argv = spec.argv;
    this.cwd = spec.cwd;
    this.rows = spec.rows;
    this.cols = spec.cols;
    this.#onFinished = options.onFinished;
    this.output = new RingStream(options.ringBytes, options.meter);
    if (options.kept !== undefined) {
      const { ring, writers } = options.kept;
      restoreRing(this.output, ring);
      this.writes.restore(writers);
    }
    this.answerQueries = options.answerQueries;
    this.screen = new TerminalScreen(this.output, {
      rows: spec.rows,
      cols: spec.cols,
      answerQueries: options.answerQueries,
      maxCells: options.screenMaxCells,
      reply: (data) => this.#reply(data),
    });
    feedRing(handle.output, this.output, (chunk, offset) => this.screen.observe(chunk, offset));
    const ended = options.kept?.ended;
    this.settled = handle.done.then(async (outcome) => {
      this.exit = outcome;
      this.exitedAt = ended === undefined ? new Date() : new Date(ended.exitedAt);
      // The callers waiting for the exit are answered first: the log line's write, and the sweep's scan of the process table, come after.
      await new Promise((resolve) => setImmediate(resolve));
      this.log.info({ exit: outcome }, 'terminal exited');
      await this.#sweep(options.sweepRetryDelaysMs ?? SWEEP_RETRY_DELAYS_MS);
    });
  }

  async #sweep(delays: readonly number[]): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.handle.terminate();
        this.#finish();
        return;
      } catch (error) {
        const delay = delays[attempt];
        if (delay === undefined) {
          this.log.error({ err: error, attempts: attempt + 1 }, 'terminal session cleanup failed; it is retried when the session is terminated');
          return;
        }
        this.log.error({ err: error }, 'terminal session cleanup failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  #finish(): void {
    if (this.finishedAt !== undefined) return;
    this.finishedAt = new Date();
    this.#onFinished();
  }

  /** Ends the session; fails with CLEANUP_FAILED while processes of it survive. */
  async terminate(): Promise<void> {
    await this.handle.terminate();
    await this.settled;
    // Where the automatic sweep gave up, this terminate is the sweep that succeeded.
    this.#finish();
  }

  /** Resolves once the kernel took the bytes; false when (`writer`, `seq`) shows a retry of an applied write. */
  retainedBytes(): number {
    return this.output.retained;
  }

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
    this.screen.resize(rows, cols);
  }

  /** Writes the screen's answer to a query of the program; one the terminal no longer takes is dropped. */
  #reply(data: string): void {
    if (this.exit !== undefined) return;
    try {
      this.handle.write(data).catch((error: unknown) => this.log.debug({ err: error }, 'answer to a terminal query not written'));
    } catch (error) {
      this.log.debug({ err: error }, 'answer to a terminal query not written');
    }
  }

  /**
   * What the next image of the daemon needs to rebuild this session, for a
   * takeover: `terminal` is what its provider handed over (it no longer reads
   * the terminal), undefined for one that ended. Every byte read from the
   * terminal is in the ring by now.
   */
  takeoverRecord(terminal: TerminalRecord['terminal']): TerminalRecord {
    return {
      ...this.keptFacts(),
      rows: this.rows,
      cols: this.cols,
      answerQueries: this.answerQueries,
      ring: ringRecord(this.output),
      ...(terminal === undefined ? {} : { terminal }),
    };
  }

  override dispose(): void {
    this.screen.dispose();
  }

  /** Its facts; `usage: false` leaves out its usage, which costs reads of its cgroups (a resize's answer has none). */
  info(options: { usage?: boolean } = {}): TerminalInfo {
    return {
      id: this.id,
      pid: this.handle.pid,
      argv: [...this.argv],
      cwd: this.cwd,
      rows: this.rows,
      cols: this.cols,
      status: this.exit === undefined ? 'running' : 'exited',
      exit: this.exit ?? null,
      treeExited: this.finishedAt !== undefined,
      createdAt: this.createdAt.toISOString(),
      exitedAt: this.exitedAt?.toISOString() ?? null,
      answerQueries: this.answerQueries,
      output: { start: this.output.start, end: this.output.end, ended: this.output.ended },
      ...this.accounting(options.usage === false ? undefined : this.handle.usage?.()),
    };
  }
}

/**
 * The handle of a terminal that had ended, and been swept, before a takeover:
 * nothing of it runs, its output ended, and `done` answers how it ended.
 */
export class EndedTerminal implements ProviderTerminal {
  readonly pid: number;
  readonly output: Readable = Readable.from([]);
  readonly done: Promise<SubprocessOutcome>;

  constructor(pid: number, exit: SubprocessOutcome) {
    this.pid = pid;
    this.done = Promise.resolve(exit);
  }

  write(): Promise<void> {
    return Promise.reject(new ServiceError('TERMINAL_EXITED', 'the terminal has exited'));
  }
  resize(): void {
    throw new ServiceError('TERMINAL_EXITED', 'the terminal has exited');
  }
  inspectForeground(): Promise<undefined> {
    return Promise.resolve(undefined);
  }
  signalForeground(): Promise<number> {
    return Promise.reject(new ServiceError('TERMINAL_EXITED', 'the terminal has exited'));
  }
  terminate(): Promise<void> {
    return Promise.resolve();
  }
}
