/**
 * The Windows inspector: the Toolhelp32 process table, creation-time start
 * identities and zero-time waits for liveness (see `win32/processes.ts`).
 * Windows has no process groups: a terminal's foreground "group" is its
 * shell's pid, and nothing proves that a program waits for input, so
 * readiness degrades to the silence tier as on macOS.
 *
 * Signals: SIGKILL ends exactly the process its identity names, through the
 * handle that identity was read on; any other signal is `taskkill /T`
 * without `/F`, a close request console programs do not honour. Ending a
 * whole tree is the Job Object's work (`containment/job-object.ts`).
 * @module
 */
import { loadKernel32 } from '../win32/kernel32.ts';
import { WindowsProcesses } from '../win32/processes.ts';
import type { InputWait, ProcessIdentity, ProcessInspector, ProcessRow, TerminalDevice } from './inspector.ts';
import { InspectionUnsupportedError } from './inspector.ts';

/** The host's processes, read through kernel32 on first use. */
export function hostWindowsProcesses(): WindowsProcesses {
  try {
    return new WindowsProcesses(loadKernel32());
  } catch (error) {
    throw new InspectionUnsupportedError(`the Windows process table cannot be read: ${(error as Error).message}`);
  }
}

export class Win32Inspector implements ProcessInspector {
  readonly platform = 'win32' as const;
  readonly exactInputWait = false;
  readonly #open: () => WindowsProcesses;
  #processes: WindowsProcesses | undefined;

  /** @param processes The process layer, made on first use. @default {@link hostWindowsProcesses} */
  constructor(processes: () => WindowsProcesses = hostWindowsProcesses) {
    this.#open = processes;
  }

  get #system(): WindowsProcesses {
    this.#processes ??= this.#open();
    return this.#processes;
  }

  /** The shell's own pid: the pseudo group every Windows terminal has. */
  foregroundGroup(shellPid: number): number | undefined {
    return shellPid;
  }

  terminalDevice(path: string): TerminalDevice {
    return { path };
  }

  inputWait(): InputWait | undefined {
    return undefined;
  }

  identity(pid: number): ProcessIdentity | undefined {
    const state = this.#system.state(pid);
    return state?.running === true ? { pid, started: state.started } : undefined;
  }

  /** The table, each row with its identity; a process whose identity cannot be read is left out. */
  snapshotOf(pids: readonly number[]): ProcessRow[] {
    // The table is read in one call here: the rows of `pids` are filtered from it.
    const wanted = new Set(pids);
    return this.snapshot().filter((row) => wanted.has(row.identity.pid));
  }

  snapshot(): ProcessRow[] {
    const system = this.#system;
    const rows: ProcessRow[] = [];
    for (const entry of system.entries()) {
      const state = system.state(entry.pid);
      if (state === undefined) continue;
      rows.push({
        identity: { pid: entry.pid, started: state.started },
        name: entry.name,
        ppid: entry.ppid,
        pgrp: undefined,
        session: undefined,
        alive: state.running,
        startTicks: undefined,
      });
    }
    return rows;
  }

  nowTicks(): number | undefined {
    return undefined;
  }

  isAlive(identity: ProcessIdentity): boolean {
    const state = this.#system.state(identity.pid);
    return state?.running === true && state.started === identity.started;
  }

  /** A pseudo group is one process: live while it runs, not live once it exited, unknown when unreadable. */
  groupHasLiveMembers(pgid: number): boolean | undefined {
    const state = this.#system.state(pgid);
    return state === undefined ? undefined : state.running;
  }

  /** `taskkill /PID pgid /T`, with `/F` only for SIGKILL, as the reference does. */
  signalGroup(pgid: number, signal: NodeJS.Signals): void {
    this.#system.taskkill(pgid, signal === 'SIGKILL');
  }

  signalProcess(identity: ProcessIdentity, signal: NodeJS.Signals): boolean {
    if (signal === 'SIGKILL') return this.#system.terminate(identity.pid, identity.started);
    if (!this.isAlive(identity)) return false;
    this.#system.taskkill(identity.pid, false);
    return true;
  }
}
