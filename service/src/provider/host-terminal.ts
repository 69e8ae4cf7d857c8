/**
 * What every terminal of this host is, whatever the platform makes it of (a
 * pty on POSIX, `posix/terminal.ts`; a pseudoconsole on Windows,
 * `win32/terminal.ts`): the contract the runtime and the daemon use, the
 * options a terminal is opened with, and what both implementations share.
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SubprocessTerminalForeground, SubprocessTerminalHandle } from '@execworld/sdk/seam';
import { MAX_TERMINAL_SIZE, TERMINAL_SIGNALS } from '@execworld/sdk/seam';
import type { SessionCell } from './containment/containment.ts';
import type { ProcessInspector } from './inspect/inspector.ts';

/** The seam's foreground facts, plus the identity of the input wait when there is one. */
export interface TerminalForeground extends SubprocessTerminalForeground {
  /**
   * Present while `inputWaiting`: stays the same while the group stays blocked in
   * the same wait and changes once it wakes and blocks again.
   */
  inputWaitToken?: string;
  /** Present while `inputWaiting`: the command name of the program proven to wait, where the platform tells it. */
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
}

/** The signals `signalForeground` accepts. */
export { TERMINAL_SIGNALS };

export { MAX_TERMINAL_SIZE };

/** Input accepted for a program that does not read it, by default, before writes are refused. */
export const DEFAULT_INPUT_BACKLOG_BYTES = 4 * 1024 * 1024;

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
