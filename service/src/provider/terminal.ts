/**
 * One terminal: a process on a new pseudo-terminal and the POSIX session it
 * leads, with the seam's foreground inspection, signalling and whole-session
 * cleanup.
 *
 * Cleanup is fenced on identities (pid + start time): the handle tracks every
 * process it has seen in the terminal's tree or session, keeps tracking those
 * that reparent away, and never signals a pid whose start time changed.
 *
 * With a containment cell the terminal is born into it, and terminate ends
 * what the cell still holds after the session's own cleanup (processes that
 * left the session with setsid): TERM, grace, then the cell is killed whole.
 * It resolves only once the cell is empty.
 * @module
 */
import { constants as osConstants } from 'node:os';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  SubprocessOutcome,
  SubprocessTerminalForeground,
  SubprocessTerminalHandle,
  SubprocessTerminalSignal,
} from '@execworld/sdk/seam';
import { MAX_TERMINAL_SIZE, retryableOnce } from '@execworld/sdk/seam';
import type { SessionCell } from './containment/containment.ts';
import { CleanupError, ProviderError } from './errors.ts';
import { ProcessIndex, type ProcessIdentity, type ProcessInspector, type ProcessRow, type TerminalDevice } from './inspect/inspector.ts';
import { PtyClosedError, UnixPty, type PtyExit } from './pty.ts';
import { assertPositiveInteger } from './validate.ts';

/** The seam's foreground facts, plus the identity of the input wait when there is one. */
export interface TerminalForeground extends SubprocessTerminalForeground {
  /**
   * Present while `inputWaiting`: stays the same while the group stays blocked in
   * the same wait and changes once it wakes and blocks again.
   */
  inputWaitToken?: string;
}

/** The signals `signalForeground` accepts. */
export const TERMINAL_SIGNALS: readonly SubprocessTerminalSignal[] = ['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGTSTP', 'SIGHUP'];

export { MAX_TERMINAL_SIZE };

/** Poll interval while cleanup waits for processes to go. */
const CLEANUP_POLL_MS = 5;
/** SIGKILL rounds against members forked while earlier ones died. */
const KILL_ROUNDS = 8;
/** Least time a killed cell is given to empty (processes in uninterruptible sleep die late). */
const CELL_KILL_WAIT_MS = 5000;

/** Output buffered for a slow reader before the terminal is paused. */
const OUTPUT_HIGH_WATER_BYTES = 64 * 1024;
/** Input accepted for a program that does not read it, by default, before writes are refused. */
export const DEFAULT_INPUT_BACKLOG_BYTES = 4 * 1024 * 1024;

export interface TerminalOptions {
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly rows: number;
  readonly cols: number;
  readonly graceMs: number;
  readonly inspector: ProcessInspector;
  /** Input bytes waiting for the program to read them, at most. @default DEFAULT_INPUT_BACKLOG_BYTES */
  readonly inputBacklogBytes?: number;
  /** The containment cell the terminal is born into and owns from then on. */
  readonly cell?: SessionCell | undefined;
}

function signalName(signal: number): NodeJS.Signals | null {
  if (signal === 0) return null;
  for (const [name, value] of Object.entries(osConstants.signals)) if (value === signal) return name as NodeJS.Signals;
  return null;
}

const identityKey = (identity: ProcessIdentity): string => `${identity.pid}:${identity.started}`;

export class LocalTerminal implements SubprocessTerminalHandle {
  readonly pid: number;
  readonly output: Readable;
  readonly done: Promise<SubprocessOutcome>;
  /** Path of the terminal device, e.g. `/dev/pts/3`. */
  readonly device: string;

  readonly #pty: UnixPty;
  readonly #inspector: ProcessInspector;
  readonly #terminalDevice: TerminalDevice;
  readonly #graceMs: number;
  readonly #inputBacklogBytes: number;
  /** The top-level process, when its identity could be read at start. */
  readonly #root: ProcessIdentity | undefined;
  readonly #tracked = new Map<string, ProcessIdentity>();
  readonly #cell: SessionCell | undefined;
  /** When the top-level process exited, in the inspector's clock ticks. */
  #exitTicks: number | undefined;
  #exited = false;
  #resolveDone!: (outcome: SubprocessOutcome) => void;
  readonly #terminate = retryableOnce(() => this.#terminateOnce());

  constructor(options: TerminalOptions) {
    this.#inspector = options.inspector;
    this.#graceMs = options.graceMs;
    this.#inputBacklogBytes = options.inputBacklogBytes ?? DEFAULT_INPUT_BACKLOG_BYTES;
    this.#cell = options.cell;
    // The reader's demand drives the terminal: a full buffer pauses it, a read resumes it.
    this.output = new Readable({ highWaterMark: OUTPUT_HIGH_WATER_BYTES, read: () => this.#pty.resume() });
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
    const cell = options.cell;
    this.#pty = new UnixPty(
      {
        file: options.file,
        args: options.args,
        env: options.env,
        cwd: options.cwd,
        cols: options.cols,
        rows: options.rows,
        ...(cell === undefined ? {} : { spawnInside: <T>(spawn: () => T): T => cell.spawnInside(spawn) }),
      },
      { onData: (chunk) => this.#onData(chunk), onExit: (exit) => this.#onExit(exit) },
    );
    this.pid = this.#pty.pid;
    this.device = this.#pty.device;
    cell?.attach(this.pid, [this.device]);
    this.#terminalDevice = this.#inspector.terminalDevice(this.device);
    this.#root = this.#inspector.identity(this.pid);
  }

  /** True once the top-level process has exited. */
  get exited(): boolean {
    return this.#exited;
  }

  /**
   * False once the terminal's master is closed: its program closed every
   * descriptor of the terminal, or the terminal was released. Input and resize
   * are refused from then on, even while the program runs.
   */
  get inputOpen(): boolean {
    return !this.#exited && this.#pty.open;
  }

  write(data: string): Promise<void> {
    if (typeof data !== 'string') return Promise.reject(new ProviderError('INVALID_ARGUMENT', 'terminal input must be a string'));
    if (this.#exited) return Promise.reject(new ProviderError('TERMINAL_EXITED', 'the terminal has exited'));
    const pending = this.#pty.pendingInputBytes;
    if (pending > 0 && pending + Buffer.byteLength(data) > this.#inputBacklogBytes) {
      return Promise.reject(
        new ProviderError('LIMIT_EXCEEDED', `the terminal's program is not reading its input: ${pending} bytes already wait (the limit is ${this.#inputBacklogBytes})`),
      );
    }
    return this.#pty.write(data).catch((error: unknown) => {
      throw this.#closedError(error) ?? error;
    });
  }

  /** Changes the terminal's size; the foreground program gets SIGWINCH. */
  resize(cols: number, rows: number): void {
    assertPositiveInteger('cols', cols, MAX_TERMINAL_SIZE);
    assertPositiveInteger('rows', rows, MAX_TERMINAL_SIZE);
    if (this.#exited) throw new ProviderError('TERMINAL_EXITED', 'the terminal has exited');
    try {
      this.#pty.resize(cols, rows);
    } catch (error) {
      throw this.#closedError(error) ?? error;
    }
  }

  /** The seam's error for a refused write or resize, or undefined for any other failure. */
  #closedError(error: unknown): ProviderError | undefined {
    if (this.#exited) return new ProviderError('TERMINAL_EXITED', 'the terminal has exited', { cause: error });
    if (error instanceof PtyClosedError) {
      return new ProviderError('TERMINAL_CLOSED', "the terminal's program closed the terminal; it takes no more input", { cause: error });
    }
    return undefined;
  }

  inspectForeground(): Promise<TerminalForeground | undefined> {
    return promised(() => this.#foreground());
  }

  signalForeground(signal: SubprocessTerminalSignal): Promise<number> {
    return promised(() => {
      if (!TERMINAL_SIGNALS.includes(signal)) {
        throw new ProviderError('INVALID_ARGUMENT', `signal must be one of ${TERMINAL_SIGNALS.join(', ')}, got ${String(signal)}`);
      }
      // Only the group is needed: no process-table scan and no input-wait probe on the way to the signal.
      const pgid = this.#exited ? undefined : this.#inspector.foregroundGroup(this.pid);
      if (pgid === undefined) {
        throw new ProviderError('NO_FOREGROUND_GROUP', "cannot resolve the terminal's foreground process group");
      }
      if (signal === 'SIGKILL' && pgid === this.pid) {
        throw new ProviderError('SIGNAL_REFUSED', "refusing SIGKILL to the terminal's own shell group; terminate the terminal session instead");
      }
      this.#inspector.signalGroup(pgid, signal);
      return pgid;
    });
  }

  terminate(): Promise<void> {
    return this.#terminate();
  }

  /** Synchronous last resort while the host exits: SIGKILL everything, await nothing. */
  terminateForHostExit(): void {
    const kill = (targets: ProcessIdentity[]): void => {
      for (const target of targets) this.#inspector.signalProcess(target, 'SIGKILL');
    };
    kill(this.#refresh());
    if (!this.#exited) this.#signalShell('SIGKILL');
    kill(this.#refresh());
    this.#cell?.kill();
  }

  #foreground(): TerminalForeground | undefined {
    if (this.#exited) return undefined;
    const rows = this.#inspector.snapshot();
    this.#refresh(rows);
    const pgid = this.#inspector.foregroundGroup(this.pid);
    if (pgid === undefined) return undefined;
    const wait = this.#inspector.inputWait(pgid, this.#terminalDevice, rows);
    // A proven wait is reported only once every byte the terminal produced before
    // it was delivered on `output`: a program blocks in read only after its
    // earlier writes reached the terminal, and the flush reads them all. Output
    // still buffered for a slow reader means "not yet"; the next poll proves it.
    if (wait === undefined || !this.#pty.flush() || this.output.readableLength > 0) return { processGroupId: pgid, inputWaiting: false };
    return { processGroupId: pgid, inputWaiting: true, inputWaitToken: wait.token };
  }

  #onData(chunk: Buffer): void {
    if (!this.output.push(chunk)) this.#pty.pause();
  }

  #onExit(exit: PtyExit): void {
    // From now on, session members are adopted only if they started before this.
    this.#exitTicks = this.#inspector.nowTicks();
    this.#exited = true;
    this.output.push(null);
    const signal = signalName(exit.signal);
    this.#resolveDone({ exitCode: exit.signal === 0 ? exit.exitCode : null, signal });
  }

  /**
   * Rescans the process table and returns the tracked members that still live.
   * New members are adopted from the top-level process's tree and session while
   * it is alive; after it exited, from the session members that started before
   * its exit (a process that later gets its pid and starts a session of the same
   * id is younger), and always from the trees of members already tracked.
   */
  #refresh(rows?: readonly ProcessRow[]): ProcessIdentity[] {
    const root = this.#root;
    if (root === undefined) return [];
    const index = new ProcessIndex(rows ?? this.#inspector.snapshot());
    const adopt = (identity: ProcessIdentity): void => {
      if (identity.pid !== root.pid) this.#tracked.set(identityKey(identity), identity);
    };
    if (!this.#exited && index.has(root)) {
      for (const row of index.tree(root)) adopt(row.identity);
      for (const row of index.rows) if (row.session === root.pid) adopt(row.identity);
    } else if (this.#exitTicks !== undefined) {
      for (const row of index.rows) {
        if (row.session === root.pid && row.startTicks !== undefined && row.startTicks <= this.#exitTicks) adopt(row.identity);
      }
    }
    for (const member of [...this.#tracked.values()]) for (const row of index.tree(member)) adopt(row.identity);
    for (const [key, identity] of this.#tracked) {
      const row = index.get(identity.pid);
      if (row === undefined || !row.alive || row.identity.started !== identity.started) this.#tracked.delete(key);
    }
    return [...this.#tracked.values()];
  }

  #signalShell(signal: NodeJS.Signals): void {
    if (this.#root !== undefined) {
      this.#inspector.signalProcess(this.#root, signal);
      return;
    }
    try {
      this.#pty.kill(signal);
    } catch (_error) {
      // Already gone.
    }
  }

  async #terminateOnce(): Promise<void> {
    // Members forked by the living shell while its children die (a loop) are not
    // survivors: they are swept once the shell is gone. One that outlived SIGKILL is.
    const unkillable = await this.#stopDescendants();
    if (unkillable.length > 0) throw survivorsError(unkillable);
    if (!this.#exited) {
      // A real terminal close: the controlling process gets SIGHUP, which ends an
      // interactive shell at once (it ignores SIGTERM). TERM is for programs that
      // only handle that; CONT wakes a stopped one so the signals act.
      this.#signalShell('SIGHUP');
      this.#signalShell('SIGTERM');
      this.#signalShell('SIGCONT');
      if (!(await this.#exitWithin(this.#graceMs))) {
        this.#signalShell('SIGKILL');
        if (!(await this.#exitWithin(this.#graceMs))) {
          throw new CleanupError(`terminal cleanup failed; surviving pid: ${this.pid}`, [this.pid]);
        }
      }
    }
    // Children forked while the shell handled its signals, and members that outlived it.
    const survivors = await this.#stopDescendants();
    const left = union(survivors, this.#refresh());
    if (left.length > 0) throw survivorsError(left);
    await this.#emptyCell();
    this.#pty.close();
  }

  /**
   * Ends what the cell still holds once the session's own members are gone:
   * processes that left the session (setsid) and were never tracked. TERM and
   * CONT, the grace, then the whole cell is killed.
   */
  async #emptyCell(): Promise<void> {
    const cell = this.#cell;
    if (cell === undefined) return;
    if (!cell.isEmpty()) {
      for (const pid of cell.pids()) {
        // A pid read from the cell names another process only if its number came round between the read and the signal.
        for (const signal of ['SIGTERM', 'SIGCONT'] as const) {
          try {
            process.kill(pid, signal);
          } catch (_error) {
            // Gone meanwhile.
          }
        }
      }
      if (!(await this.#cellEmptyWithin(cell, this.#graceMs))) {
        cell.kill();
        if (!(await this.#cellEmptyWithin(cell, Math.max(this.#graceMs, CELL_KILL_WAIT_MS)))) {
          const pids = cell.pids();
          throw new CleanupError(`terminal cleanup failed; surviving pids: ${pids.join(', ')}`, pids);
        }
      }
    }
    cell.remove();
  }

  async #cellEmptyWithin(cell: SessionCell, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (cell.isEmpty()) return true;
      const remaining = deadline - Date.now();
      if (remaining <= 0) return false;
      await sleep(Math.min(CLEANUP_POLL_MS, remaining));
    }
  }

  async #exitWithin(ms: number): Promise<boolean> {
    if (this.#exited) return true;
    const timeout = new AbortController();
    try {
      return await Promise.race([this.done.then(() => true), sleep(ms, false, { signal: timeout.signal })]);
    } finally {
      timeout.abort();
    }
  }

  /**
   * TERM, grace, then rounds of KILL to every tracked member, each round taking
   * in the members forked meanwhile. Returns the members that outlived a SIGKILL
   * and its grace; members still being forked by a living ancestor outside the
   * targets (the shell) after the last round are not waited for.
   */
  async #stopDescendants(): Promise<ProcessIdentity[]> {
    const first = this.#refresh();
    for (const target of first) {
      this.#inspector.signalProcess(target, 'SIGTERM');
      this.#inspector.signalProcess(target, 'SIGCONT');
    }
    let survivors = first.length > 0 ? await this.#survivorsAfter(first, this.#graceMs) : [];
    for (let round = 0; round < KILL_ROUNDS; round += 1) {
      const targets = union(survivors, this.#refresh());
      if (targets.length === 0) return [];
      for (const target of targets) this.#inspector.signalProcess(target, 'SIGKILL');
      survivors = await this.#survivorsAfter(targets, this.#graceMs);
      if (survivors.length > 0) return survivors;
    }
    return [];
  }

  async #survivorsAfter(targets: readonly ProcessIdentity[], ms: number): Promise<ProcessIdentity[]> {
    const deadline = Date.now() + ms;
    for (;;) {
      const survivors = targets.filter((target) => this.#inspector.isAlive(target));
      const remaining = deadline - Date.now();
      if (survivors.length === 0 || remaining <= 0) return survivors;
      await sleep(Math.min(CLEANUP_POLL_MS, remaining));
    }
  }
}

/** The value of a synchronous call as a promise; a throw becomes the rejection. */
function promised<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

function survivorsError(survivors: readonly ProcessIdentity[]): CleanupError {
  const pids = survivors.map((target) => target.pid);
  return new CleanupError(`terminal cleanup failed; surviving pids: ${pids.join(', ')}`, pids);
}

function union(a: readonly ProcessIdentity[], b: readonly ProcessIdentity[]): ProcessIdentity[] {
  const all = new Map<string, ProcessIdentity>();
  for (const identity of [...a, ...b]) all.set(identityKey(identity), identity);
  return [...all.values()];
}
