/**
 * What every terminal of this host is, whatever the platform makes it of (a
 * pty on POSIX, `posix/terminal.ts`; a pseudoconsole on Windows,
 * `win32/terminal.ts`): the contract the runtime and the daemon use, the
 * options a terminal is opened with, and {@link BaseTerminal}, which both
 * implementations extend: it checks every call's preconditions (argument
 * types, an exited or closed terminal, the input backlog, the size bounds,
 * the signal set, SIGKILL to the shell's own group) before the platform's
 * part runs.
 * @module
 */
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SubprocessOutcome, SubprocessTerminalForeground, SubprocessTerminalHandle, SubprocessTerminalSignal } from '@execworld/sdk/seam';
import { MAX_TERMINAL_SIZE, TERMINAL_SIGNALS } from '@execworld/sdk/seam';
import type { SessionAccounting, SessionCell, SessionUsage, UsageMeter } from './containment/containment.ts';
import { ProviderError } from './errors.ts';
import type { ProcessInspector } from './inspect/inspector.ts';
import { InputBacklog } from './input-backlog.ts';
import { assertPositiveInteger } from './validate.ts';

/** The seam's foreground facts, plus the identity of the input wait when there is one. */
export interface TerminalForeground extends SubprocessTerminalForeground {
  /**
   * Present while `inputWaiting`: stays the same while the group stays blocked in
   * the same wait and changes once it wakes and blocks again.
   */
  inputWaitToken?: string;
  /**
   * Present while `inputWaiting`, where the platform tells it: whether the
   * terminal reads input by lines (canonical mode), so that the waiting read
   * wakes only at a line's end or an end of file; in raw mode (a pager, an
   * editor) any byte wakes it.
   */
  readsLines?: boolean;
  /**
   * The command name, where the platform tells it: while `inputWaiting`, of
   * the program proven to wait; else of the group's leader (a program that
   * starts another one, by exec, changes it).
   */
  command?: string;
}

/** A terminal of this host, whatever the platform makes it of: what the runtime and the daemon use of it. */
export interface HostTerminal extends SubprocessTerminalHandle {
  /** Path of the terminal device (`/dev/pts/3`), or what names it where it has none. */
  readonly device: string;
  /** True once the top-level process has exited. */
  readonly exited: boolean;
  /** False once the terminal takes no more input. */
  readonly inputOpen: boolean;
  write(data: string): Promise<void>;
  /** Changes the terminal's size. */
  resize(cols: number, rows: number): void;
  inspectForeground(): Promise<TerminalForeground | undefined>;
  /** Synchronous last resort while the host exits: ends everything, awaits nothing. */
  terminateForHostExit(): void;
  /** A takeover's: stops reading, and answers what the next image needs; undefined when it cannot be handed over. Absent where unsupported. */
  handOver?(): { pid: number; fd: number; device: string; graceMs: number } | undefined;
  /** Reads on after a takeover that did not happen. */
  resumeAfterHandOver?(): void;
  /** What the terminal's session used (its cell's counters); undefined where its cell keeps none. */
  usage(): SessionUsage | undefined;
  /** Its cell's counters for the daemon's metrics; undefined where its cell keeps none. */
  accounting(): SessionAccounting | undefined;
  /** Starts measuring one run in the terminal (a persistent shell's command); undefined where its cell keeps no counters. */
  usageMeter(): UsageMeter | undefined;
  /** The pids of the terminal's session's live processes now; undefined where they cannot be told. */
  members?(): number[] | undefined;
}

/** The signals `signalForeground` accepts. */
export { TERMINAL_SIGNALS };

export { MAX_TERMINAL_SIZE };

export { DEFAULT_INPUT_BACKLOG_BYTES } from './input-backlog.ts';

export interface TerminalOptions {
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  /** The user the child drops to (gid, then uid) before it execs `file`; the host's own when absent. */
  readonly uid?: number | undefined;
  readonly gid?: number | undefined;
  readonly env: Readonly<Record<string, string>>;
  readonly rows: number;
  readonly cols: number;
  readonly graceMs: number;
  readonly inspector: ProcessInspector;
  /** Input bytes waiting for the program to read them, at most. @default DEFAULT_INPUT_BACKLOG_BYTES */
  readonly inputBacklogBytes?: number;
  /** The containment cell the terminal is born into and owns from then on. */
  readonly cell?: SessionCell | undefined;
  /** A terminal kept from this process's previous image (a takeover) instead of a new one: nothing is started. */
  readonly adopt?: { readonly pid: number; readonly fd: number; readonly device: string } | undefined;
}

/**
 * A terminal's contract over its platform's part: each call's preconditions
 * are checked here, once for every platform, and only then is the subclass's
 * part (`writeInput`, `resizeTerminal`, `foregroundGroup`, `deliverSignal`)
 * called.
 */
export abstract class BaseTerminal implements HostTerminal {
  abstract readonly pid: number;
  abstract readonly output: Readable;
  abstract readonly done: Promise<SubprocessOutcome>;
  abstract readonly device: string;
  /** The bound on input the program has not read. */
  readonly #backlog: InputBacklog;
  readonly #usageCell: SessionCell | undefined;

  protected constructor(options: Pick<TerminalOptions, 'inputBacklogBytes' | 'cell'>) {
    this.#backlog = new InputBacklog(options.inputBacklogBytes, "the terminal's program is not reading its input");
    this.#usageCell = options.cell;
  }

  usage(): SessionUsage | undefined {
    return this.#usageCell?.usage?.();
  }

  usageMeter(): UsageMeter | undefined {
    return this.#usageCell?.usageMeter?.();
  }

  accounting(): SessionAccounting | undefined {
    return this.#usageCell?.accounting?.();
  }

  abstract get exited(): boolean;
  abstract get inputOpen(): boolean;
  abstract inspectForeground(): Promise<TerminalForeground | undefined>;
  abstract terminate(): Promise<void>;
  abstract terminateForHostExit(): void;

  /** Why a terminal whose input is closed (while its program may run on) takes no more. */
  protected abstract readonly closedReason: string;
  /** Bytes of input written and not yet taken by the program (by the kernel, for its read). */
  protected abstract get pendingInputBytes(): number;
  /** Writes `data`, which the preconditions let through, to the terminal's input. */
  protected abstract writeInput(data: string): Promise<void>;
  /** Sets the size, which the preconditions let through. */
  protected abstract resizeTerminal(cols: number, rows: number): void;
  /** The foreground process group of a terminal that has not exited; undefined when there is none. */
  protected abstract foregroundGroup(): Promise<number | undefined>;
  /** Sends `signal`, which the preconditions let through, to the foreground group `pgid`. */
  protected abstract deliverSignal(pgid: number, signal: SubprocessTerminalSignal): void;

  /**
   * Refuses a signal of the set this platform does not have.
   * @throws {ProviderError} UNSUPPORTED
   */
  protected assertSignalSupported(_signal: SubprocessTerminalSignal): void {
    // Every signal of the set, by default.
  }

  write(data: string): Promise<void> {
    try {
      if (typeof data !== 'string') throw new ProviderError('INVALID_ARGUMENT', 'terminal input must be a string');
      if (this.exited) throw new ProviderError('TERMINAL_EXITED', 'the terminal has exited');
      if (!this.inputOpen) throw new ProviderError('TERMINAL_CLOSED', this.closedReason);
      this.#backlog.admit(this.pendingInputBytes, Buffer.byteLength(data));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    // Synchronously after the check: the bytes count as pending before the next write is checked.
    return this.writeInput(data);
  }

  /** Changes the terminal's size; its foreground program learns it (SIGWINCH) where the platform tells it. */
  resize(cols: number, rows: number): void {
    assertPositiveInteger('cols', cols, MAX_TERMINAL_SIZE);
    assertPositiveInteger('rows', rows, MAX_TERMINAL_SIZE);
    if (this.exited) throw new ProviderError('TERMINAL_EXITED', 'the terminal has exited');
    this.resizeTerminal(cols, rows);
  }

  async signalForeground(signal: SubprocessTerminalSignal): Promise<number> {
    if (!(TERMINAL_SIGNALS as readonly string[]).includes(signal)) {
      throw new ProviderError('INVALID_ARGUMENT', `signal must be one of ${TERMINAL_SIGNALS.join(', ')}, got ${String(signal)}`);
    }
    this.assertSignalSupported(signal);
    const pgid = this.exited ? undefined : await this.foregroundGroup();
    if (pgid === undefined) throw new ProviderError('NO_FOREGROUND_GROUP', "cannot resolve the terminal's foreground process group");
    if (signal === 'SIGKILL' && pgid === this.pid) {
      throw new ProviderError('SIGNAL_REFUSED', "refusing SIGKILL to the terminal's own shell group; terminate the terminal session instead");
    }
    this.deliverSignal(pgid, signal);
    return pgid;
  }
}

/** The value of a synchronous call as a promise; a throw becomes the rejection. */
export function promised<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

/** Poll interval while a cell is waited on to empty. */
const CELL_POLL_MS = 5;

/** Whether `cell` is empty within `ms`, looked at every few milliseconds. */
export async function cellEmptyWithin(cell: SessionCell, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (cell.isEmpty()) return true;
    const remaining = deadline - Date.now();
    if (remaining <= 0) return false;
    await sleep(Math.min(CELL_POLL_MS, remaining));
  }
}
