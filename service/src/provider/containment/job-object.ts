/**
 * Containment on Windows: each session's processes in a Job Object of their
 * own, created with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`.
 *
 * - Children inherit the job, and the job allows no breakaway, so a process
 *   that detached from its parent (a new console, a new process group, its
 *   parent gone) is still in it.
 * - `kill()` is `TerminateJobObject`: the whole tree at once, exit code 1 as
 *   `taskkill /F` leaves it.
 * - The job's process list tells whether anything of the session still runs.
 * - The daemon holds the only handle of every job, so a daemon that dies, by
 *   any means, closes them, and Windows ends every session with it.
 *
 * Windows cannot start a process inside a job from Node, so the top-level
 * process is assigned right after it was created. A process it started before
 * that (within microseconds of its start) is not in the job: `kill()` first
 * adopts every descendant of the job's members it finds in the process table.
 *
 * Where no job can be made, `create()` answers undefined and the platform's
 * tree control falls back on the reference's `taskkill /T /F`. Where the
 * top-level process cannot be assigned, the cell falls back on that process's
 * own identity.
 * @module
 */
import type { Containment, SessionCell } from './containment.ts';
import {
  isValidHandle,
  PROCESS_QUERY_LIMITED_INFORMATION,
  PROCESS_SET_QUOTA,
  PROCESS_TERMINATE,
  SYNCHRONIZE,
  type Handle,
  type Kernel32,
} from '../win32/kernel32.ts';
import { FORCED_EXIT_CODE, type WindowsProcesses } from '../win32/processes.ts';

export class JobObjectContainment implements Containment {
  readonly mode = 'job' as const;
  readonly #kernel32: Kernel32;
  readonly #processes: WindowsProcesses;

  constructor(kernel32: Kernel32, processes: WindowsProcesses) {
    this.#kernel32 = kernel32;
    this.#processes = processes;
  }

  /** A new job with kill-on-close, or undefined when none can be made. */
  create(sessionKey: string): SessionCell | undefined {
    const kernel32 = this.#kernel32;
    const job = kernel32.CreateJobObject();
    if (!isValidHandle(job)) return undefined;
    if (!kernel32.setKillOnJobClose(job)) {
      kernel32.CloseHandle(job);
      return undefined;
    }
    return new JobCell(sessionKey, job, kernel32, this.#processes);
  }
}

interface Root {
  readonly pid: number;
  readonly started: string | undefined;
}

class JobCell implements SessionCell {
  readonly complete = false;
  readonly key: string;
  readonly #job: Handle;
  readonly #kernel32: Kernel32;
  readonly #processes: WindowsProcesses;
  #root: Root | undefined;
  /** Whether the top-level process is in the job; until then the job says nothing. */
  #assigned = false;
  #closed = false;

  constructor(key: string, job: Handle, kernel32: Kernel32, processes: WindowsProcesses) {
    this.key = key;
    this.#job = job;
    this.#kernel32 = kernel32;
    this.#processes = processes;
  }

  /** Windows starts no process inside a job from here: the process is assigned by {@link attach} right after. */
  spawnInside<T>(spawn: () => T): T {
    return spawn();
  }

  attach(pid: number): void {
    this.#root = { pid, started: this.#processes.state(pid)?.started };
    if (this.#closed) return;
    this.#assigned = this.#assign(pid);
  }

  isEmpty(): boolean {
    const pids = this.#jobPids();
    if (pids !== undefined) return pids.length === 0;
    return !this.#rootRunning();
  }

  pids(): number[] {
    const pids = this.#jobPids();
    if (pids !== undefined) return pids;
    return this.#rootRunning() ? [this.#root!.pid] : [];
  }

  kill(): void {
    if (this.#assigned && !this.#closed) {
      this.#adoptStrays();
      if (this.#kernel32.TerminateJobObject(this.#job, FORCED_EXIT_CODE)) return;
    }
    const root = this.#root;
    if (root === undefined || !this.#rootRunning()) return;
    this.#processes.taskkill(root.pid, true);
    if (root.started !== undefined) this.#processes.terminate(root.pid, root.started);
  }

  remove(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#kernel32.CloseHandle(this.#job);
  }

  /** The job's processes, or undefined when the job cannot tell (nothing assigned, closed, or the query failed). */
  #jobPids(): number[] | undefined {
    if (!this.#assigned || this.#closed) return undefined;
    return this.#kernel32.jobProcessIds(this.#job);
  }

  #rootRunning(): boolean {
    const root = this.#root;
    if (root?.started === undefined) return false;
    const state = this.#processes.state(root.pid);
    return state?.running === true && state.started === root.started;
  }

  #assign(pid: number): boolean {
    const kernel32 = this.#kernel32;
    const process = kernel32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE | PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, pid);
    if (!isValidHandle(process)) return false;
    try {
      return kernel32.AssignProcessToJobObject(this.#job, process);
    } finally {
      kernel32.CloseHandle(process);
    }
  }

  /**
   * Assigns to the job every running descendant of its members that is not in
   * it. A parent pid is trusted only for a child created after that parent, so
   * a recycled pid does not make a stranger a descendant.
   */
  #adoptStrays(): void {
    const members = this.#jobPids();
    if (members === undefined || members.length === 0) return;
    const inJob = new Set(members);
    const created = new Map<number, bigint | undefined>();
    const startOf = (pid: number): bigint | undefined => {
      if (!created.has(pid)) created.set(pid, this.#processes.state(pid)?.created);
      return created.get(pid);
    };
    const entries = this.#processes.entries();
    let grew = true;
    while (grew) {
      grew = false;
      for (const entry of entries) {
        if (inJob.has(entry.pid) || !inJob.has(entry.ppid)) continue;
        const child = startOf(entry.pid);
        const parent = startOf(entry.ppid);
        if (child === undefined || parent === undefined || child < parent) continue;
        inJob.add(entry.pid);
        this.#assign(entry.pid);
        grew = true;
      }
    }
  }
}
