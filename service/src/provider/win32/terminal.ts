/**
 * One terminal on Windows: a program on a pseudoconsole (ConPTY), its
 * processes in the session's Job Object.
 *
 * Windows has no process groups and no terminal signals, so:
 * - the foreground "group" is always the shell's pid, and no input wait is
 *   ever proven (readiness falls back on prompts and silence);
 * - SIGINT is a Ctrl-C typed into the console (`\x03`), which the console
 *   turns into a Ctrl-C event for the programs attached to it (at a bare
 *   prompt it cancels the line being typed);
 * - SIGTERM asks the shell's tree to close (`taskkill /T` without `/F`), which
 *   console programs do not honour; SIGKILL to the shell is refused as on
 *   POSIX (terminate the session instead); SIGTSTP and SIGHUP do not exist.
 *
 * terminate: the close request and a grace wait, then the session's job is
 * ended whole (or, without a job, the shell by its identity), then whatever
 * is left in the job. A shell ended from outside may never be reported by
 * the pseudoconsole: once its absence is verified, `done` settles with
 * `{ exitCode: null, signal: null }`.
 * @module
 */
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SubprocessOutcome, SubprocessTerminalSignal } from '@execworld/sdk/seam';
import { retryableOnce } from '@execworld/sdk/seam';
import type { SessionCell } from '../containment/containment.ts';
import { CleanupError, ProviderError } from '../errors.ts';
import type { ProcessIdentity, ProcessInspector } from '../inspect/inspector.ts';
import { BaseTerminal, cellEmptyWithin, promised, type TerminalForeground, type TerminalOptions } from '../host-terminal.ts';
import type { ConPty, ConPtyFactory } from './conpty.ts';

/** Output buffered for a slow reader before the pseudoconsole is paused. */
const OUTPUT_HIGH_WATER_BYTES = 64 * 1024;
/** How often terminate looks whether the shell is gone. */
const POLL_MS = 25;
/** The Ctrl-C a console turns into a Ctrl-C event. */
const CTRL_C = '\x03';

export class WindowsTerminal extends BaseTerminal {
  readonly pid: number;
  readonly output: Readable;
  readonly done: Promise<SubprocessOutcome>;
  /** A pseudoconsole has no device path. */
  readonly device = 'conpty';

  readonly #pty: ConPty;
  readonly #inspector: ProcessInspector;
  readonly #graceMs: number;
  readonly #cell: SessionCell | undefined;
  /** The shell's start identity, when it could be read; everything done to the shell by pid is fenced on it. */
  readonly #root: ProcessIdentity | undefined;
  #exited = false;
  #closed = false;
  #resolveDone!: (outcome: SubprocessOutcome) => void;
  readonly #terminate = retryableOnce(() => this.#terminateOnce());

  protected readonly closedReason = 'the terminal was closed; it takes no more input';

  constructor(options: TerminalOptions, open: ConPtyFactory) {
    super(options);
    this.#inspector = options.inspector;
    this.#graceMs = options.graceMs;
    this.#cell = options.cell;
    this.output = new Readable({ highWaterMark: OUTPUT_HIGH_WATER_BYTES, read: () => this.#pty.resume() });
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
    const start = (): ConPty => open({ file: options.file, args: options.args, cwd: options.cwd, env: options.env, cols: options.cols, rows: options.rows });
    this.#pty = options.cell === undefined ? start() : options.cell.spawnInside(start);
    this.pid = this.#pty.pid;
    try {
      options.cell?.attach(this.pid);
      this.#root = this.#inspector.identity(this.pid);
    } catch (error) {
      // Nothing is published: the program goes with its pseudoconsole (and its job, when the caller removes it).
      this.#pty.close();
      throw error;
    }
    this.#pty.onData((data) => {
      if (!this.#exited && !this.output.push(Buffer.from(data, 'utf8'))) this.#pty.pause();
    });
    this.#pty.onExit(({ exitCode }) => this.#settle({ exitCode, signal: null }));
  }

  get exited(): boolean {
    return this.#exited;
  }

  get inputOpen(): boolean {
    return !this.#exited && !this.#closed;
  }

  protected get pendingInputBytes(): number {
    return this.#pty.pendingInputBytes;
  }

  protected writeInput(data: string): Promise<void> {
    return promised(() => this.#pty.write(data));
  }

  /** A pseudoconsole tells its programs the new size itself. */
  protected resizeTerminal(cols: number, rows: number): void {
    this.#pty.resize(cols, rows);
  }

  inspectForeground(): Promise<TerminalForeground | undefined> {
    return Promise.resolve(this.#exited ? undefined : { processGroupId: this.pid, inputWaiting: false });
  }

  /** Windows has no job control and no hangup signal. */
  protected override assertSignalSupported(signal: SubprocessTerminalSignal): void {
    if (signal === 'SIGTSTP' || signal === 'SIGHUP') throw new ProviderError('UNSUPPORTED', `${signal} is unsupported on Windows`);
  }

  /** The foreground group is the shell itself on Windows. */
  protected foregroundGroup(): Promise<number> {
    return Promise.resolve(this.pid);
  }

  protected deliverSignal(pgid: number, signal: SubprocessTerminalSignal): void {
    if (signal === 'SIGINT') this.#pty.write(CTRL_C);
    else this.#inspector.signalGroup(pgid, signal);
  }

  terminate(): Promise<void> {
    return this.#terminate();
  }

  terminateForHostExit(): void {
    this.#cell?.kill();
    if (!this.#exited && this.#root !== undefined) this.#inspector.signalProcess(this.#root, 'SIGKILL');
  }

  /** Whether the shell is gone: reported exited, or its identity verified absent. */
  #gone(): boolean {
    return this.#exited || (this.#root !== undefined && !this.#inspector.isAlive(this.#root));
  }

  async #goneWithin(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.#gone()) return true;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await sleep(Math.min(POLL_MS, left));
    }
  }

  async #terminateOnce(): Promise<void> {
    if (!this.#gone()) {
      if (this.#root !== undefined) this.#inspector.signalProcess(this.#root, 'SIGTERM');
      else this.#pty.close();
      if (!(await this.#goneWithin(this.#graceMs))) {
        if (this.#cell !== undefined) this.#cell.kill();
        else if (this.#root !== undefined) this.#inspector.signalProcess(this.#root, 'SIGKILL');
        if (!(await this.#goneWithin(this.#graceMs))) throw new CleanupError(`terminal cleanup failed; surviving pid: ${this.pid}`, [this.pid]);
      }
    }
    // What the shell started and left behind is still in the job.
    const cell = this.#cell;
    if (cell !== undefined) {
      if (!cell.isEmpty()) {
        cell.kill();
        if (!(await cellEmptyWithin(cell, this.#graceMs))) {
          const pids = cell.pids();
          throw new CleanupError(`terminal cleanup failed; surviving pids: ${pids.join(', ')}`, pids);
        }
      }
      cell.remove();
    }
    // A shell ended from outside may never be reported: its verified absence settles done.
    this.#settle({ exitCode: null, signal: null });
    this.#closed = true;
    this.#pty.close();
  }

  #settle(outcome: SubprocessOutcome): void {
    if (this.#exited) return;
    this.#exited = true;
    this.output.push(null);
    this.#resolveDone(outcome);
  }
}
