/**
 * A Windows process table for the tests that run where Windows does not: the
 * {@link Kernel32} calls answered from a small model that behaves as Windows
 * was seen to (a Toolhelp32 table, creation FILETIMEs, zero-time waits, jobs
 * inherited by children with no breakaway, kill-on-close, recycled pids),
 * with switches for what goes wrong (invalid handles, failed calls).
 */
import { LocalRuntime } from '../../service/src/provider/local-runtime.ts';
import {
  JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
  WAIT_OBJECT_0,
  WAIT_TIMEOUT,
  type Handle,
  type JobAccounting,
  type JobCpuRate,
  type JobLimits,
  type JobMessage,
  type Kernel32,
  type ProcessEntry,
} from '../../service/src/provider/win32/kernel32.ts';

export interface FakeProcess {
  pid: number;
  ppid: number;
  name: string;
  created: bigint;
  running: boolean;
  exitCode: number | undefined;
  jobs: Set<number>;
}

interface OpenHandle {
  kind: 'process' | 'job' | 'port';
  process?: FakeProcess;
  job?: number;
  port?: JobMessage[];
}

/** A fake job: what was set on it, what its processes used (100 ns units, bytes), and where its messages go. */
export interface FakeJob {
  killOnClose: boolean;
  closed: boolean;
  limits: Omit<JobLimits, 'peakJobMemoryUsed'> | undefined;
  cpuRate: JobCpuRate | undefined;
  userTime: bigint;
  kernelTime: bigint;
  peakMemory: bigint;
  port: { queue: JobMessage[]; key: number } | undefined;
}

/** ERROR_INVALID_PARAMETER, what Wine answers for a CPU rate. */
export const ERROR_INVALID_PARAMETER = 87;

export class FakeKernel32 implements Kernel32 {
  /** Every process ever created, newest last; a recycled pid has several. */
  readonly processes: FakeProcess[] = [];
  readonly jobs = new Map<number, FakeJob>();
  /** Read every job limit back as 0, as Wine does (Windows reads back what was set). */
  forgetLimits = false;
  /** Refuse a CPU rate with ERROR_INVALID_PARAMETER, as Wine does. */
  refuseCpuRate = false;
  #lastError = 0;
  /** What OpenProcess answers instead of a handle, when set (null, 0, -1…). */
  invalid: { readonly handle: Handle } | undefined;
  /** What WaitForSingleObject answers instead of the truth, when set. */
  waitResult: number | undefined;
  /** Make CreateJobObject fail. */
  failJobs = false;
  /** Make AssignProcessToJobObject fail. */
  failAssign = false;
  /** Make the job process-list query fail. */
  failJobQuery = false;
  /** Called whenever a process ends, however it ended. */
  readonly ended: ((process: FakeProcess) => void)[] = [];
  /** Handles open now: a test can check that every one was closed. */
  readonly open = new Map<number, OpenHandle>();
  #nextHandle = 4;
  #nextJob = 1;
  #clock = 133_000_000_000_000_000n;

  /** A new running process; a child of a process in jobs is in those jobs (no breakaway). */
  spawn(pid: number, ppid: number, name = 'node.exe'): FakeProcess {
    this.#clock += 10_000n;
    const parent = this.live(ppid);
    const process: FakeProcess = { pid, ppid, name, created: this.#clock, running: true, exitCode: undefined, jobs: new Set(parent?.jobs ?? []) };
    this.processes.push(process);
    return process;
  }

  /** The running process with this pid, if any. */
  live(pid: number): FakeProcess | undefined {
    return this.processes.findLast((process) => process.pid === pid && process.running);
  }

  /** Ends `pid` as an exit of its own would. */
  exit(pid: number, code = 0): void {
    const process = this.live(pid);
    if (process !== undefined) this.#kill(process, code);
  }

  processEntries(): ProcessEntry[] | undefined {
    return this.processes.filter((process) => process.running).map(({ pid, ppid, name }) => ({ pid, ppid, name }));
  }

  OpenProcess(_access: number, pid: number): Handle {
    if (this.invalid !== undefined) return this.invalid.handle;
    // An exited process's object lives while someone holds it; here, the newest with the pid.
    const process = this.processes.findLast((candidate) => candidate.pid === pid);
    if (process === undefined) return null;
    return this.#handle({ kind: 'process', process });
  }

  processCreationTime(handle: Handle): bigint | undefined {
    return this.#get(handle)?.process?.created;
  }

  WaitForSingleObject(handle: Handle): number {
    if (this.waitResult !== undefined) return this.waitResult;
    const process = this.#get(handle)?.process;
    if (process === undefined) return 0xffff_ffff;
    return process.running ? WAIT_TIMEOUT : WAIT_OBJECT_0;
  }

  TerminateProcess(handle: Handle, exitCode: number): boolean {
    const process = this.#get(handle)?.process;
    if (process?.running !== true) return false;
    this.#kill(process, exitCode);
    return true;
  }

  CloseHandle(handle: Handle): boolean {
    const open = this.#get(handle);
    if (open === undefined) return false;
    this.open.delete(handle as number);
    if (open.kind === 'job') {
      const job = this.jobs.get(open.job!)!;
      job.closed = true;
      if (job.killOnClose) for (const process of this.#members(open.job!)) this.#kill(process, 1);
    }
    return true;
  }

  CreateJobObject(): Handle {
    if (this.failJobs) return null;
    const id = this.#nextJob++;
    this.jobs.set(id, {
      killOnClose: false,
      closed: false,
      limits: undefined,
      cpuRate: undefined,
      userTime: 0n,
      kernelTime: 0n,
      peakMemory: 0n,
      port: undefined,
    });
    return this.#handle({ kind: 'job', job: id });
  }

  /** The fake job a handle names. */
  job(handle: Handle): FakeJob | undefined {
    const open = this.#get(handle);
    return open?.kind === 'job' ? this.jobs.get(open.job!) : undefined;
  }

  /** The job `pid` is in, newest first: where Windows would account for it. */
  jobOf(pid: number): FakeJob | undefined {
    const process = this.live(pid);
    const id = process === undefined ? undefined : [...process.jobs].at(-1);
    return id === undefined ? undefined : this.jobs.get(id);
  }

  /** Windows queues `message` about `pid` on the port of the job. */
  post(job: FakeJob, message: number, pid = 0): void {
    job.port?.queue.push({ message, key: job.port.key, pid });
  }

  setJobLimits(handle: Handle, limits: Omit<JobLimits, 'peakJobMemoryUsed'>): boolean {
    const job = this.job(handle);
    if (job === undefined) return false;
    job.limits = { ...limits };
    job.killOnClose = (limits.limitFlags & JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) !== 0;
    return true;
  }

  jobLimits(handle: Handle): JobLimits | undefined {
    const job = this.job(handle);
    if (job === undefined) return undefined;
    if (this.forgetLimits || job.limits === undefined) return { limitFlags: 0, activeProcessLimit: 0, jobMemoryLimit: 0n, peakJobMemoryUsed: 0n };
    return { ...job.limits, peakJobMemoryUsed: job.peakMemory };
  }

  setJobCpuRate(handle: Handle, rate: JobCpuRate): boolean {
    const job = this.job(handle);
    if (job === undefined) return false;
    if (this.refuseCpuRate) {
      this.#lastError = ERROR_INVALID_PARAMETER;
      return false;
    }
    job.cpuRate = { ...rate };
    return true;
  }

  jobCpuRate(handle: Handle): JobCpuRate | undefined {
    const job = this.job(handle);
    if (job === undefined || this.refuseCpuRate) return undefined;
    return job.cpuRate ?? { controlFlags: 0, cpuRate: 0 };
  }

  jobAccounting(handle: Handle): JobAccounting | undefined {
    const open = this.#get(handle);
    const job = this.job(handle);
    if (job === undefined) return undefined;
    const active = this.#members(open!.job!).length;
    return { totalUserTime: job.userTime, totalKernelTime: job.kernelTime, totalProcesses: active, activeProcesses: active };
  }

  createCompletionPort(): Handle {
    return this.#handle({ kind: 'port', port: [] });
  }

  associateCompletionPort(handle: Handle, port: Handle, key: number): boolean {
    const job = this.job(handle);
    const queue = this.#get(port)?.port;
    if (job === undefined || queue === undefined) return false;
    job.port = { queue, key };
    return true;
  }

  takeCompletions(port: Handle, max: number): JobMessage[] {
    return this.#get(port)?.port?.splice(0, max) ?? [];
  }

  GetLastError(): number {
    return this.#lastError;
  }

  AssignProcessToJobObject(job: Handle, handle: Handle): boolean {
    const target = this.#get(job);
    const process = this.#get(handle)?.process;
    if (this.failAssign || target?.kind !== 'job' || process?.running !== true) return false;
    process.jobs.add(target.job!);
    return true;
  }

  jobProcessIds(job: Handle): number[] | undefined {
    const open = this.#get(job);
    if (this.failJobQuery || open?.kind !== 'job') return undefined;
    return this.#members(open.job!).map((process) => process.pid);
  }

  TerminateJobObject(job: Handle, exitCode: number): boolean {
    const open = this.#get(job);
    if (open?.kind !== 'job') return false;
    for (const process of this.#members(open.job!)) this.#kill(process, exitCode);
    return true;
  }

  wineVersion(): string | undefined {
    return undefined;
  }

  #members(job: number): FakeProcess[] {
    return this.processes.filter((process) => process.running && process.jobs.has(job));
  }

  #kill(process: FakeProcess, code: number): void {
    if (!process.running) return;
    process.running = false;
    process.exitCode = code;
    for (const listener of this.ended) listener(process);
  }

  #handle(open: OpenHandle): Handle {
    const handle = this.#nextHandle;
    this.#nextHandle += 4;
    this.open.set(handle, open);
    return handle;
  }

  #get(handle: Handle): OpenHandle | undefined {
    return typeof handle === 'number' ? this.open.get(handle) : undefined;
  }
}

/** What a fake pseudoconsole does, as recorded on Windows and in Wine. */
export interface FakeConPtyBehaviour {
  /** The pseudoconsole never reports the program's exit (a shell killed from outside). */
  readonly silentExit?: boolean;
  /** At start, ask for the cursor position and hold every later output until an answer is typed, as ConPTY does. */
  readonly cursorRequest?: boolean;
  /** What the program prints at start (after the cursor answer, when one is asked for). */
  readonly banner?: string;
  /** The program never reads its input: what is typed stays in the pseudoconsole's input pipe. */
  readonly readsNoInput?: boolean;
}

/** A cursor position report, `ESC [ row ; col R`. */
const CURSOR_ANSWER = new RegExp(String.raw`\u001b\[\d+;\d+R`);

/** A pseudoconsole over the fake process table: its program is a fake process, its input a record. */
export class FakeConPty {
  readonly pid: number;
  readonly process: FakeProcess;
  /** Everything typed into the console. */
  readonly typed: string[] = [];
  readonly sizes: [number, number][] = [];
  closed = false;
  paused = false;
  #data: ((data: string) => void)[] = [];
  #exit: ((exit: { exitCode: number }) => void)[] = [];
  #held: string[] = [];
  #answered: boolean;
  readonly #readsInput: boolean;

  constructor(kernel32: FakeKernel32, pid: number, behaviour: FakeConPtyBehaviour) {
    this.pid = pid;
    this.process = kernel32.spawn(pid, 100, 'pwsh.exe');
    this.#answered = behaviour.cursorRequest !== true;
    this.#readsInput = behaviour.readsNoInput !== true;
    kernel32.ended.push((process) => {
      if (process === this.process && behaviour.silentExit !== true)
        queueMicrotask(() => this.#exit.forEach((listener) => listener({ exitCode: process.exitCode! })));
    });
    queueMicrotask(() => {
      if (behaviour.cursorRequest === true) this.#emit('\x1b[6n', true);
      if (behaviour.banner !== undefined) this.emit(behaviour.banner);
    });
  }

  /** The program prints `data` (held back while the cursor request is unanswered). */
  emit(data: string): void {
    this.#emit(data, false);
  }

  onData(listener: (data: string) => void): void {
    this.#data.push(listener);
  }

  onExit(listener: (exit: { exitCode: number }) => void): void {
    this.#exit.push(listener);
  }

  /** Bytes typed that the program has not read: all of them when it reads no input. */
  get pendingInputBytes(): number {
    return this.#readsInput ? 0 : this.typed.reduce((sum, data) => sum + Buffer.byteLength(data), 0);
  }

  write(data: string): void {
    if (this.closed) throw new Error('the pseudoconsole is closed');
    this.typed.push(data);
    if (!this.#answered && CURSOR_ANSWER.test(data)) {
      this.#answered = true;
      for (const held of this.#held.splice(0)) this.#emit(held, false);
    }
  }

  resize(cols: number, rows: number): void {
    this.sizes.push([cols, rows]);
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
  }

  close(): void {
    this.closed = true;
  }

  #emit(data: string, always: boolean): void {
    if (!always && !this.#answered) {
      this.#held.push(data);
      return;
    }
    for (const listener of this.#data) listener(data);
  }
}

/**
 * A LocalRuntime following the Windows rules over the fake process table, its terminals on
 * fake pseudoconsoles with `behaviour` (pids 1000, 1004, …), and a taskkill that does nothing,
 * as console programs take a polite one.
 */
export function fakeWindowsRuntime(behaviour: FakeConPtyBehaviour = {}): { runtime: LocalRuntime; kernel32: FakeKernel32; ptys: FakeConPty[] } {
  const kernel32 = new FakeKernel32();
  const ptys: FakeConPty[] = [];
  const runtime = new LocalRuntime({
    platform: 'win32',
    windows: {
      kernel32,
      taskkill: () => {},
      conpty: () => {
        const pty = new FakeConPty(kernel32, 1000 + 4 * ptys.length, behaviour);
        ptys.push(pty);
        return pty;
      },
    },
  });
  return { runtime, kernel32, ptys };
}
