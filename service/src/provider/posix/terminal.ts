/**
 * One terminal: a process on a new pseudo-terminal and the POSIX session it
 * leads, with the seam's foreground inspection, signalling and whole-session
 * cleanup.
 *
 * Cleanup is fenced on identities (pid + start time): see `terminal-members.ts`.
 *
 * With a containment cell the terminal is born into it, and terminate ends
 * what the cell still holds after the session's own cleanup (processes that
 * left the session with setsid): TERM, grace, then the cell is killed whole.
 * It resolves only once the cell is empty.
 * @module
 */
import { chownSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SubprocessOutcome, SubprocessTerminalSignal } from '@execworld/sdk/seam';
import { retryableOnce } from '@execworld/sdk/seam';
import type { SessionCell } from '../containment/containment.ts';
import { CleanupError, ProviderError } from '../errors.ts';
import { BaseTerminal, type TerminalForeground, type TerminalOptions } from '../host-terminal.ts';
import { sessionRows, type ProcessInspector, type ProcessRow, type TerminalDevice } from '../inspect/inspector.ts';
import { PtyClosedError, UnixPty, type PtyExit } from './pty.ts';
import { QueryScanner } from '../query-scanner.ts';
import { emptyCell, SessionMembers, survivorsError, union } from './terminal-members.ts';

/** How long a signal sent as a terminal starts waits for its child to take the terminal, which it does before it execs. */
const FIRST_FOREGROUND_WAIT_MS = 5000;

/** Output buffered for a slow reader before the terminal is paused. */
const OUTPUT_HIGH_WATER_BYTES = 64 * 1024;

function signalName(signal: number): NodeJS.Signals | null {
  if (signal === 0) return null;
  for (const [name, value] of Object.entries(osConstants.signals)) if (value === signal) return name as NodeJS.Signals;
  return null;
}

export class LocalTerminal extends BaseTerminal {
  readonly pid: number;
  readonly output: Readable;
  readonly done: Promise<SubprocessOutcome>;
  /** Path of the terminal device, e.g. `/dev/pts/3`. */
  readonly device: string;

  readonly #pty: UnixPty;
  readonly #inspector: ProcessInspector;
  readonly #terminalDevice: TerminalDevice;
  readonly #graceMs: number;
  /** The session's processes, fenced on identities. */
  readonly #members: SessionMembers;
  readonly #cell: SessionCell | undefined;
  /**
   * The rows of the session's processes: a complete cell's alone (a cgroup), so
   * inspecting and ending a terminal cost the same however many other sessions
   * the host runs; otherwise the whole process table.
   */
  readonly #rows: () => ProcessRow[];
  #exited = false;
  /** A foreground group was seen: the child took the terminal. */
  #hadForeground = false;
  /** Spots the terminal queries (cursor position, device attributes…) in the output. */
  readonly #queries = new QueryScanner();
  /**
   * The program sent a query and no input was written since: it may be
   * blocked on the answer (which whoever reads the output writes, if anyone),
   * not on a person. Any input clears it: the program's read returns then.
   */
  #queryUnanswered = false;
  #resolveDone!: (outcome: SubprocessOutcome) => void;
  readonly #terminate = retryableOnce(() => this.#terminateOnce());

  protected readonly closedReason = "the terminal's program closed the terminal; it takes no more input";

  constructor(options: TerminalOptions) {
    super(options);
    this.#inspector = options.inspector;
    this.#graceMs = options.graceMs;
    this.#cell = options.cell;
    // The reader's demand drives the terminal: a full buffer pauses it, a read resumes it.
    this.output = new Readable({ highWaterMark: OUTPUT_HIGH_WATER_BYTES, read: () => this.#pty.resume() });
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
    const cell = options.cell;
    const events = { onData: (chunk: Buffer) => this.#onData(chunk), onExit: (exit: PtyExit) => this.#onExit(exit) };
    this.#pty =
      options.adopt !== undefined
        ? new UnixPty(options.adopt, events)
        : new UnixPty(
            {
              file: options.file,
              args: options.args,
              env: options.env,
              cwd: options.cwd,
              uid: options.uid,
              gid: options.gid,
              cols: options.cols,
              rows: options.rows,
              ...(cell === undefined ? {} : { spawnInside: <T>(spawn: () => T, threads: number): T => cell.spawnInside(spawn, threads) }),
            },
            events,
          );
    this.pid = this.#pty.pid;
    this.device = this.#pty.device;
    // The terminal is its user's, as a login's is: the program may reopen it by name (tty, script, tmux). The name is devpts', no user's.
    if (options.adopt === undefined && options.uid !== undefined && options.gid !== undefined) {
      try {
        chownSync(this.device, options.uid, options.gid);
      } catch (_error) {
        // Best effort: the program runs on a device that stays root's, which it may still use by its descriptors.
      }
    }
    cell?.attach(this.pid, [this.device]);
    this.#terminalDevice = this.#inspector.terminalDevice(this.device);
    this.#rows = () => sessionRows(this.#inspector, cell);
    this.#members = new SessionMembers(this.#inspector, this.#inspector.identity(this.pid), this.#rows);
  }

  /**
   * Stops reading the terminal for a takeover and answers what the next image
   * needs to adopt it, or undefined when it cannot be handed over (it exited,
   * its master closed, or node-pty's fork started it).
   */
  handOver(): { pid: number; fd: number; device: string; graceMs: number } | undefined {
    if (this.#exited || !this.#pty.canHandOver) return undefined;
    this.#pty.handOver();
    return { pid: this.pid, fd: this.#pty.fd, device: this.device, graceMs: this.#graceMs };
  }

  /** Reads on after a takeover that did not happen. */
  resumeAfterHandOver(): void {
    this.#pty.resumeAfterHandOver();
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

  protected get pendingInputBytes(): number {
    return this.#pty.pendingInputBytes;
  }

  protected writeInput(data: string): Promise<void> {
    this.#queryUnanswered = false;
    return this.#pty.write(data).catch((error: unknown) => {
      throw this.#closedError(error) ?? error;
    });
  }

  /** The foreground program gets SIGWINCH. */
  protected resizeTerminal(cols: number, rows: number): void {
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

  /** Asked right after the create, this waits (as a signal does) for the child to take the terminal, so it never answers "no foreground" for a program that has not yet started. */
  async inspectForeground(): Promise<TerminalForeground | undefined> {
    if (!this.#hadForeground) await this.foregroundGroup();
    return this.#foreground();
  }

  /** Only the group is needed: no process-table scan and no input-wait probe on the way to the signal. */
  protected async foregroundGroup(): Promise<number | undefined> {
    const pgid = this.#foregroundNow() ?? (await this.#firstForeground());
    if (pgid !== undefined) this.#hadForeground = true;
    return pgid;
  }

  protected deliverSignal(pgid: number, signal: SubprocessTerminalSignal): void {
    this.#inspector.signalGroup(pgid, signal);
  }

  /**
   * The foreground group of a terminal that has had none yet: right after
   * the fork, the child has not yet made its session and taken the terminal
   * (it does so before it execs), so a signal sent at once waits for that,
   * up to {@link FIRST_FOREGROUND_WAIT_MS}. A terminal that had a foreground
   * group and has none now (its program gave the terminal up) is not waited for.
   */
  async #firstForeground(): Promise<number | undefined> {
    const deadline = Date.now() + FIRST_FOREGROUND_WAIT_MS;
    while (!this.#hadForeground && !this.#exited && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      const pgid = this.#exited ? undefined : this.#foregroundNow();
      if (pgid !== undefined) return pgid;
    }
    return undefined;
  }

  /**
   * The foreground group now: asked on the master where the kernel answers
   * there (one ioctl, on the path of every signal and foreground probe), else
   * read from the shell's process entry. Both say none once the shell exited
   * or gave the terminal up, and before its session took the terminal.
   */
  #foregroundNow(): number | undefined {
    const pgid = this.#pty.foregroundGroup();
    if (pgid === undefined) return this.#inspector.foregroundGroup(this.pid);
    return pgid > 0 ? pgid : undefined;
  }

  terminate(): Promise<void> {
    return this.#terminate();
  }

  /** The pids of the session's live processes now, as its members are tracked (a complete cell's, or the terminal's session's). */
  members(): number[] {
    return this.#members.refresh(this.#rows()).map((member) => member.pid);
  }

  /** Synchronous last resort while the host exits: SIGKILL everything, await nothing. */
  terminateForHostExit(): void {
    this.#members.killAll();
    if (!this.#exited) this.#signalShell('SIGKILL');
    this.#members.killAll();
    this.#cell?.kill();
  }

  #foreground(): TerminalForeground | undefined {
    if (this.#exited) return undefined;
    const rows = this.#rows();
    this.#members.refresh(rows);
    const pgid = this.#foregroundNow();
    if (pgid === undefined) return undefined;
    const wait = this.#inspector.inputWait(pgid, this.#terminalDevice, rows);
    // A proven wait is reported only once every byte the terminal produced before
    // it was delivered on `output`: a program blocks in read only after its
    // earlier writes reached the terminal, and the flush reads them all. Output
    // still buffered for a slow reader means "not yet"; the next poll proves it.
    // A program blocked on the answer to a query it sent (found in the output the flush read) waits for the
    // terminal, not for input: no proof until input came after the query.
    if (wait === undefined || !this.#pty.flush() || this.output.readableLength > 0 || this.#queryUnanswered) {
      const leader = rows.find((row) => row.identity.pid === pgid)?.name;
      return { processGroupId: pgid, inputWaiting: false, ...(leader === undefined ? {} : { command: leader }) };
    }
    const command = wait.command ?? rows.find((row) => row.identity.pid === wait.readers[0])?.name;
    const readsLines = this.#pty.readsLines();
    return {
      processGroupId: pgid,
      inputWaiting: true,
      inputWaitToken: wait.token,
      ...(command === undefined ? {} : { command }),
      ...(readsLines === undefined ? {} : { readsLines }),
    };
  }

  #onData(chunk: Buffer): void {
    if (this.#queries.scan(chunk)) this.#queryUnanswered = true;
    if (!this.output.push(chunk)) this.#pty.pause();
  }

  #onExit(exit: PtyExit): void {
    // From now on, session members are adopted only if they started before this.
    this.#members.rootExited();
    this.#exited = true;
    this.output.push(null);
    const signal = signalName(exit.signal);
    this.#resolveDone({ exitCode: exit.signal === 0 ? exit.exitCode : null, signal });
  }

  #signalShell(signal: NodeJS.Signals): void {
    if (this.#members.signalRoot(signal)) return;
    try {
      this.#pty.kill(signal);
    } catch (_error) {
      // Already gone.
    }
  }

  async #terminateOnce(): Promise<void> {
    // Members forked by the living shell while its children die (a loop) are not
    // survivors: they are swept once the shell is gone. One that outlived SIGKILL is.
    const unkillable = await this.#members.stop(this.#graceMs);
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
    const survivors = await this.#members.stop(this.#graceMs);
    const left = union(survivors, this.#members.refresh());
    if (left.length > 0) throw survivorsError(left);
    if (this.#cell !== undefined) await emptyCell(this.#cell, this.#graceMs);
    this.#pty.close();
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
}
