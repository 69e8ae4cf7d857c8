/**
 * What the Windows provider knows of processes, read through {@link Kernel32}:
 * a process's start identity (its creation FILETIME, `high:low` like the
 * reference) and whether it runs, both from one handle, so that a recycled pid
 * is never taken for the process it once named. Every read fails closed: an
 * invalid handle, a failed call or an unexpected wait result is "unreadable",
 * never "alive".
 * @module
 */
import { spawnSync } from 'node:child_process';
import {
  isValidHandle,
  PROCESS_QUERY_LIMITED_INFORMATION,
  PROCESS_TERMINATE,
  SYNCHRONIZE,
  WAIT_OBJECT_0,
  WAIT_TIMEOUT,
  type Handle,
  type Kernel32,
  type ProcessEntry,
} from './kernel32.ts';

/** A process read through one handle. */
export interface ProcessState {
  /** The creation time, `"<high>:<low>"` of its FILETIME. */
  readonly started: string;
  /** The same creation time as a number, for ordering processes by age. */
  readonly created: bigint;
  /** True while it runs; false once it has exited (its object still exists). */
  readonly running: boolean;
}

/** Runs `taskkill /PID <pid> /T`, with `/F` when `force`; every outcome is ignored. */
export type Taskkill = (pid: number, force: boolean) => void;

/** The `taskkill` of the host; an absent tree, status 128 and a missing binary are all ignored. */
export const hostTaskkill: Taskkill = (pid, force) => {
  spawnSync('taskkill', ['/PID', String(pid), '/T', ...(force ? ['/F'] : [])], { stdio: 'ignore', windowsHide: true });
};

/** The exit code a process ended by force reports, as `taskkill /F` leaves it on Windows. */
export const FORCED_EXIT_CODE = 1;

function startedText(creation: bigint): string {
  return `${creation >> 32n}:${creation & 0xffff_ffffn}`;
}

export class WindowsProcesses {
  readonly #kernel32: Kernel32;
  readonly #taskkill: Taskkill;

  constructor(kernel32: Kernel32, taskkill: Taskkill = hostTaskkill) {
    this.#kernel32 = kernel32;
    this.#taskkill = taskkill;
  }

  /** The Wine version when this is Wine, not Windows. */
  get wineVersion(): string | undefined {
    return this.#kernel32.wineVersion();
  }

  /** The process table now; empty when it cannot be read. */
  entries(): ProcessEntry[] {
    return this.#kernel32.processEntries() ?? [];
  }

  /** `pid`'s start identity and whether it runs; undefined when it cannot be read (gone, or not ours to open). */
  state(pid: number): ProcessState | undefined {
    return this.#withProcess(pid, PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, (handle, started, created) => {
      const wait = this.#kernel32.WaitForSingleObject(handle, 0);
      if (wait === WAIT_TIMEOUT) return { started, created, running: true };
      if (wait === WAIT_OBJECT_0) return { started, created, running: false };
      return undefined;
    });
  }

  /**
   * Ends the process `pid` started at `started`, through the handle its identity was checked
   * on, so no other process can be hit; true when it was running and was ended.
   */
  terminate(pid: number, started: string, exitCode = FORCED_EXIT_CODE): boolean {
    return (
      this.#withProcess(pid, PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE | PROCESS_TERMINATE, (handle, current) => {
        if (current !== started || this.#kernel32.WaitForSingleObject(handle, 0) !== WAIT_TIMEOUT) return false;
        return this.#kernel32.TerminateProcess(handle, exitCode);
      }) ?? false
    );
  }

  /** `taskkill /PID pid /T`, `/F` when `force`. */
  taskkill(pid: number, force: boolean): void {
    this.#taskkill(pid, force);
  }

  /** Runs `use` with `pid` opened with `access` and its start identity; undefined when either cannot be had. */
  #withProcess<T>(pid: number, access: number, use: (handle: Handle, started: string, created: bigint) => T): T | undefined {
    if (!Number.isInteger(pid) || pid <= 0) return undefined;
    const handle = this.#kernel32.OpenProcess(access, pid);
    if (!isValidHandle(handle)) return undefined;
    try {
      const creation = this.#kernel32.processCreationTime(handle);
      return creation === undefined ? undefined : use(handle, startedText(creation), creation);
    } finally {
      this.#kernel32.CloseHandle(handle);
    }
  }
}
