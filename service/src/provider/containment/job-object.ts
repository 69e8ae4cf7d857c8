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
 *
 * Limits are the job's, set when it is made, before the top-level process is
 * assigned to it: `memoryBytes` is `JobMemoryLimit` (memory committed by the
 * job's processes together: an allocation past it fails in the process that
 * asks, nothing is killed), `pids` is `ActiveProcessLimit` (processes at once,
 * not threads: a process creation past it fails), `cpu` is a hard-capped CPU
 * rate ({@link cpuRateFor}). Which of them this host keeps is found once, on a
 * scratch job: each is set and read back, and one the system refuses or does
 * not keep (Wine 8 refuses the CPU rate with ERROR_INVALID_PARAMETER and
 * reads every limit back as 0) is unsupported, with the call and what it
 * answered as the reason.
 *
 * Usage is the job's accounting (`TotalUserTime`, `TotalKernelTime`, in
 * 100 ns units) and `PeakJobMemoryUsed` (committed memory, which Windows
 * cannot reset: a persistent shell's run reports the session's peak).
 * `limitHit` comes from the job's completion port: one port for every limited
 * job, drained every second and whenever usage is read, its
 * `JOB_OBJECT_MSG_JOB_MEMORY_LIMIT` and `JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT`
 * messages counted for the job they name. Windows says nothing when a hard
 * cap holds a job back, so `limitHit` is never `cpu` here, and it has no OOM
 * killer, so `oomKilled` is always false: a process refused memory fails its
 * allocation (Node.js ends with a fatal out-of-memory error) and the session
 * says `limitHit: 'memory'`.
 * @module
 */
import { availableParallelism } from 'node:os';
import type { Containment, LimitName, LimitSupport, SessionCell, SessionLimits, SessionUsage, UsageMeter } from './containment.ts';
import { limitsAsked, LIMIT_NAMES } from './cgroup-limits.ts';
import { usageBetween, ZERO_COUNTERS, type UsageCounters } from './usage.ts';
import { ProviderError } from '../errors.ts';
import {
  isValidHandle,
  JOB_OBJECT_CPU_RATE_CONTROL_ENABLE,
  JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP,
  JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
  JOB_OBJECT_LIMIT_JOB_MEMORY,
  JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
  JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT,
  JOB_OBJECT_MSG_JOB_MEMORY_LIMIT,
  PROCESS_QUERY_LIMITED_INFORMATION,
  PROCESS_SET_QUOTA,
  PROCESS_TERMINATE,
  SYNCHRONIZE,
  type Handle,
  type JobCpuRate,
  type Kernel32,
} from '../win32/kernel32.ts';
import { FORCED_EXIT_CODE, type WindowsProcesses } from '../win32/processes.ts';

/** CpuRate's whole: the cycles of every logical processor of the machine. */
const CPU_RATE_WHOLE = 10_000;
/** How often the completion port is drained while a limited job is open, and how many packets at most per drain. */
const DRAIN_INTERVAL_MS = 1000;
const DRAIN_MAX_PACKETS = 4096;

/**
 * The CpuRate that holds a job to `cores`: Windows' rate is the share of the
 * cycles of all `processors` logical processors, in 1/10,000ths, so `cores`
 * of N processors is cores / N × 10,000, rounded to the nearest (0.25 core of
 * 8 processors: 312.5, so 313, 3.13 % of the machine), at least 1 (a rate of
 * 0 is refused: the least a job gets is 1/10,000th of the machine, more than
 * `cores` where the machine has over 100 processors per hundredth of a core
 * asked) and at most 10,000 (every core, where `cores` ≥ N).
 */
export function cpuRateFor(cores: number, processors: number): number {
  return Math.min(CPU_RATE_WHOLE, Math.max(1, Math.round((cores / processors) * CPU_RATE_WHOLE)));
}

/** Milliseconds of a time in Windows' 100 ns units, not rounded. */
export function hundredNanosecondsToMs(time: bigint): number {
  return Number(time) / 10_000;
}

export interface JobObjectOptions {
  /** The logical processors a CPU rate is a share of. @default os.availableParallelism() */
  readonly processors?: number;
}

export class JobObjectContainment implements Containment {
  readonly mode = 'job' as const;
  readonly #kernel32: Kernel32;
  readonly #processes: WindowsProcesses;
  readonly #processors: number;
  #support: LimitSupport | undefined;
  readonly #notifications: JobNotifications;

  constructor(kernel32: Kernel32, processes: WindowsProcesses, options: JobObjectOptions = {}) {
    this.#kernel32 = kernel32;
    this.#processes = processes;
    this.#processors = options.processors ?? availableParallelism();
    this.#notifications = new JobNotifications(kernel32);
  }

  /** Which limits this host's jobs keep: found once, on a scratch job. */
  limitSupport(): LimitSupport {
    this.#support ??= probeLimits(this.#kernel32);
    return this.#support;
  }

  /**
   * A new job with kill-on-close and `limits`, or undefined when none can be made and none was asked.
   * @throws {ProviderError} INVALID_ARGUMENT naming a limit this host does not keep, or one the job refused.
   */
  create(sessionKey: string, limits?: SessionLimits): SessionCell | undefined {
    const kernel32 = this.#kernel32;
    const asked = limitsAsked(limits);
    if (asked.length > 0) {
      const unsupported = this.limitSupport().unsupported.find(({ name }) => asked.includes(name));
      if (unsupported !== undefined)
        throw new ProviderError('INVALID_ARGUMENT', `limits.${unsupported.name}: this host cannot enforce it: ${unsupported.reason}`);
    }
    const refused = (name: LimitName | undefined, call: string): ProviderError =>
      new ProviderError('INVALID_ARGUMENT', `limits.${name ?? asked[0]}: ${call} failed with error ${kernel32.GetLastError()}`);
    const job = kernel32.CreateJobObject();
    if (!isValidHandle(job)) {
      if (asked.length > 0) throw refused(undefined, 'CreateJobObjectW');
      return undefined;
    }
    try {
      const jobLimits = {
        limitFlags:
          JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE |
          (limits?.pids === undefined ? 0 : JOB_OBJECT_LIMIT_ACTIVE_PROCESS) |
          (limits?.memoryBytes === undefined ? 0 : JOB_OBJECT_LIMIT_JOB_MEMORY),
        activeProcessLimit: limits?.pids ?? 0,
        jobMemoryLimit: BigInt(limits?.memoryBytes ?? 0),
      };
      if (!kernel32.setJobLimits(job, jobLimits)) {
        if (asked.length === 0) {
          kernel32.CloseHandle(job);
          return undefined;
        }
        throw refused(
          asked.find((name) => name !== 'cpu'),
          'SetInformationJobObject(JobObjectExtendedLimitInformation)',
        );
      }
      if (limits?.cpu !== undefined && !kernel32.setJobCpuRate(job, hardCap(cpuRateFor(limits.cpu, this.#processors)))) {
        throw refused('cpu', 'SetInformationJobObject(JobObjectCpuRateControlInformation)');
      }
    } catch (error) {
      kernel32.CloseHandle(job);
      throw error;
    }
    const cell = new JobCell(sessionKey, job, kernel32, this.#processes, this.#notifications);
    // The port reports memory and process limits only (Windows sends nothing for a CPU cap): other jobs are not tied to it.
    if (limits?.memoryBytes !== undefined || limits?.pids !== undefined) this.#notifications.watch(job, cell);
    return cell;
  }
}

function hardCap(cpuRate: number): JobCpuRate {
  return { controlFlags: JOB_OBJECT_CPU_RATE_CONTROL_ENABLE | JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP, cpuRate };
}

/**
 * Which limits a job keeps here: each set on a scratch job and read back. A
 * limit the system accepts but reads back otherwise (Wine: every field 0) is
 * not kept, and is unsupported as surely as one it refuses.
 */
function probeLimits(kernel32: Kernel32): LimitSupport {
  const reasons = new Map<LimitName, string>();
  const wine = kernel32.wineVersion();
  const where = wine === undefined ? '' : ` (Wine ${wine})`;
  const job = kernel32.CreateJobObject();
  if (!isValidHandle(job)) {
    const reason = `CreateJobObjectW failed with error ${kernel32.GetLastError()}${where}`;
    return { supported: [], unsupported: LIMIT_NAMES.map((name) => ({ name, reason })) };
  }
  try {
    const set = {
      limitFlags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_ACTIVE_PROCESS | JOB_OBJECT_LIMIT_JOB_MEMORY,
      activeProcessLimit: 64,
      jobMemoryLimit: 64n << 20n,
    };
    if (!kernel32.setJobLimits(job, set)) {
      const reason = `SetInformationJobObject(JobObjectExtendedLimitInformation) failed with error ${kernel32.GetLastError()}${where}`;
      reasons.set('memoryBytes', reason).set('pids', reason);
    } else {
      const read = kernel32.jobLimits(job);
      const readBack = (field: string, value: string): string => `QueryInformationJobObject read ${field} back as ${value} where it was set to`;
      if (read === undefined) {
        const reason = `QueryInformationJobObject(JobObjectExtendedLimitInformation) failed with error ${kernel32.GetLastError()}${where}`;
        reasons.set('memoryBytes', reason).set('pids', reason);
      } else {
        if ((read.limitFlags & JOB_OBJECT_LIMIT_JOB_MEMORY) === 0 || read.jobMemoryLimit !== set.jobMemoryLimit) {
          reasons.set('memoryBytes', `the job does not keep its JobMemoryLimit: ${readBack('it', String(read.jobMemoryLimit))} ${set.jobMemoryLimit}${where}`);
        }
        if ((read.limitFlags & JOB_OBJECT_LIMIT_ACTIVE_PROCESS) === 0 || read.activeProcessLimit !== set.activeProcessLimit) {
          reasons.set(
            'pids',
            `the job does not keep its ActiveProcessLimit: ${readBack('it', String(read.activeProcessLimit))} ${set.activeProcessLimit}${where}`,
          );
        }
      }
    }
    const rate = hardCap(CPU_RATE_WHOLE / 2);
    if (!kernel32.setJobCpuRate(job, rate)) {
      reasons.set('cpu', `SetInformationJobObject(JobObjectCpuRateControlInformation) failed with error ${kernel32.GetLastError()}${where}`);
    } else {
      const read = kernel32.jobCpuRate(job);
      if (read?.controlFlags !== rate.controlFlags || read.cpuRate !== rate.cpuRate) {
        reasons.set(
          'cpu',
          `the job does not keep its CPU rate: QueryInformationJobObject read it back as ${read === undefined ? 'a failure' : String(read.cpuRate)} where it was set to ${rate.cpuRate}${where}`,
        );
      }
    }
  } finally {
    kernel32.CloseHandle(job);
  }
  return {
    supported: LIMIT_NAMES.filter((name) => !reasons.has(name)),
    unsupported: LIMIT_NAMES.flatMap((name) => {
      const reason = reasons.get(name);
      return reason === undefined ? [] : [{ name, reason }];
    }),
  };
}

/** What a job's port said about it: how many times each limit refused something. */
interface LimitMessages {
  memory: number;
  pids: number;
}

/**
 * The one completion port of every limited job, drained while any is open:
 * each packet counted for the job its key names. Windows queues a packet per
 * process created and ended in a job too, so the port is drained every
 * second ({@link DRAIN_INTERVAL_MS}, at most {@link DRAIN_MAX_PACKETS} at a
 * time) and the queue stays as short as a second of the jobs' activity.
 */
class JobNotifications {
  readonly #kernel32: Kernel32;
  /** The port, made with the first limited job. */
  #port: { readonly handle: Handle } | undefined;
  #nextKey = 1;
  readonly #watched = new Map<number, LimitMessages>();
  #timer: NodeJS.Timeout | undefined;

  constructor(kernel32: Kernel32) {
    this.#kernel32 = kernel32;
  }

  /** Sends `job`'s messages to the port, counted in `cell`'s messages; false where the port cannot be had. */
  watch(job: Handle, cell: JobCell): boolean {
    const kernel32 = this.#kernel32;
    if (this.#port === undefined) {
      const port = kernel32.createCompletionPort();
      if (!isValidHandle(port)) return false;
      this.#port = { handle: port };
    }
    const key = this.#nextKey++;
    if (!kernel32.associateCompletionPort(job, this.#port.handle, key)) return false;
    this.#watched.set(key, cell.messages);
    cell.unwatch = () => {
      this.drain();
      this.#watched.delete(key);
      if (this.#watched.size === 0 && this.#timer !== undefined) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    };
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.drain(), DRAIN_INTERVAL_MS);
      this.#timer.unref();
    }
    return true;
  }

  /** Counts what the port holds for the jobs watched. */
  drain(): void {
    if (this.#port === undefined || this.#watched.size === 0) return;
    for (const { message, key } of this.#kernel32.takeCompletions(this.#port.handle, DRAIN_MAX_PACKETS)) {
      const messages = this.#watched.get(key);
      if (messages === undefined) continue;
      if (message === JOB_OBJECT_MSG_JOB_MEMORY_LIMIT) messages.memory += 1;
      else if (message === JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT) messages.pids += 1;
    }
  }
}

interface Root {
  readonly pid: number;
  readonly started: string | undefined;
}

class JobCell implements SessionCell {
  readonly complete = false;
  readonly key: string;
  /** What the job's completion port said, where it is watched. */
  readonly messages: LimitMessages = { memory: 0, pids: 0 };
  /** Stops watching the job's port, once its messages are counted. */
  unwatch: (() => void) | undefined;
  readonly #job: Handle;
  readonly #kernel32: Kernel32;
  readonly #processes: WindowsProcesses;
  readonly #notifications: JobNotifications;
  #root: Root | undefined;
  /** Whether the top-level process is in the job; until then the job says nothing. */
  #assigned = false;
  #closed = false;
  /** The counters read as the job was closed. */
  #final: UsageCounters | undefined;

  constructor(key: string, job: Handle, kernel32: Kernel32, processes: WindowsProcesses, notifications: JobNotifications) {
    this.key = key;
    this.#job = job;
    this.#kernel32 = kernel32;
    this.#processes = processes;
    this.#notifications = notifications;
  }

  /** What the job's processes used together, from its start. */
  usage(): SessionUsage | undefined {
    const counters = this.#counters();
    return counters === undefined ? undefined : usageBetween(ZERO_COUNTERS, counters);
  }

  /** One run's usage: cpu and limits hit over the run, peak memory the session's (Windows does not reset PeakJobMemoryUsed). */
  usageMeter(): UsageMeter | undefined {
    const before = this.#counters();
    if (before === undefined) return undefined;
    return {
      usage: () => ({ ...usageBetween(before, this.#counters() ?? before), peakScope: 'session' }),
      // It holds nothing open: the job's counters are read afresh each time.
      close: () => {},
    };
  }

  /** The job's counters now, or as it was closed; undefined where the job cannot be read. */
  #counters(): UsageCounters | undefined {
    if (this.#closed) return this.#final;
    const kernel32 = this.#kernel32;
    const accounting = kernel32.jobAccounting(this.#job);
    if (accounting === undefined) return undefined;
    if (this.unwatch !== undefined) this.#notifications.drain();
    const peak = kernel32.jobLimits(this.#job)?.peakJobMemoryUsed;
    return {
      ...ZERO_COUNTERS,
      cpuUserMs: hundredNanosecondsToMs(accounting.totalUserTime),
      cpuSystemMs: hundredNanosecondsToMs(accounting.totalKernelTime),
      peakMemoryBytes: peak === undefined ? null : Number(peak),
      // The job's limit messages: a process refused at the active-process limit, an allocation at the memory limit.
      memoryFails: this.messages.memory,
      pidsMax: this.messages.pids,
    };
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
    this.#final = this.#counters();
    this.unwatch?.();
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
