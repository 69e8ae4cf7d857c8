/**
 * The Windows system calls the provider makes, as one small interface: the
 * layer tests replace with recorded behaviour, since no Windows machine runs
 * the suite. {@link loadKernel32} binds them through koffi, loaded on first
 * use and only on Windows.
 *
 * Handles are opaque values; whether one is valid is decided by
 * {@link isValidHandle} alone, above this layer.
 * @module
 */
import { createRequire } from 'node:module';
import type Koffi from 'koffi';
import { HOST_PLATFORM, hostFacts } from '../platform/host.ts';

/** A handle as a system call returned it; see {@link isValidHandle}. */
export type Handle = unknown;

/** One row of a Toolhelp32 process snapshot. */
export interface ProcessEntry {
  readonly pid: number;
  readonly ppid: number;
  /** The executable's file name, e.g. `pwsh.exe`. */
  readonly name: string;
}

/** The fields of `JOBOBJECT_EXTENDED_LIMIT_INFORMATION` the provider sets and reads. */
export interface JobLimits {
  /** `JOB_OBJECT_LIMIT_*` flags. */
  readonly limitFlags: number;
  /** Processes at once, with `JOB_OBJECT_LIMIT_ACTIVE_PROCESS`. */
  readonly activeProcessLimit: number;
  /** Bytes of memory committed by the job's processes together, with `JOB_OBJECT_LIMIT_JOB_MEMORY`. */
  readonly jobMemoryLimit: bigint;
  /** The most memory the job's processes ever had committed together (read only). */
  readonly peakJobMemoryUsed: bigint;
}

/** `JOBOBJECT_BASIC_ACCOUNTING_INFORMATION`: times in 100 ns units. */
export interface JobAccounting {
  readonly totalUserTime: bigint;
  readonly totalKernelTime: bigint;
  readonly totalProcesses: number;
  readonly activeProcesses: number;
}

/** `JOBOBJECT_CPU_RATE_CONTROL_INFORMATION` with a `CpuRate`: cycles per 10,000 of the whole machine's. */
export interface JobCpuRate {
  readonly controlFlags: number;
  readonly cpuRate: number;
}

/** One packet of a job's completion port: the `JOB_OBJECT_MSG_*` number, the job's key, and the process id where the message has one. */
export interface JobMessage {
  readonly message: number;
  readonly key: number;
  readonly pid: number;
}

/** The kernel32 calls of the Windows provider, one method per call. */
export interface Kernel32 {
  /**
   * `CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS)` walked with
   * `Process32FirstW`/`Process32NextW`, the snapshot closed after; undefined
   * when no snapshot could be taken.
   */
  processEntries(): ProcessEntry[] | undefined;
  OpenProcess(access: number, pid: number): Handle;
  /** `GetProcessTimes`' creation time as a FILETIME (100 ns since 1601), or undefined when the call fails. */
  processCreationTime(process: Handle): bigint | undefined;
  WaitForSingleObject(handle: Handle, milliseconds: number): number;
  TerminateProcess(process: Handle, exitCode: number): boolean;
  CloseHandle(handle: Handle): boolean;
  /** `CreateJobObjectW(NULL, NULL)`. */
  CreateJobObject(): Handle;
  /** `SetInformationJobObject(JobObjectExtendedLimitInformation)`: the flags and limits given, every other field 0. */
  setJobLimits(job: Handle, limits: Omit<JobLimits, 'peakJobMemoryUsed'>): boolean;
  /** `QueryInformationJobObject(JobObjectExtendedLimitInformation)`; undefined when the query fails. */
  jobLimits(job: Handle): JobLimits | undefined;
  /** `SetInformationJobObject(JobObjectCpuRateControlInformation)`. */
  setJobCpuRate(job: Handle, rate: JobCpuRate): boolean;
  /** `QueryInformationJobObject(JobObjectCpuRateControlInformation)`; undefined when the query fails. */
  jobCpuRate(job: Handle): JobCpuRate | undefined;
  /** `QueryInformationJobObject(JobObjectBasicAccountingInformation)`; undefined when the query fails. */
  jobAccounting(job: Handle): JobAccounting | undefined;
  /** `CreateIoCompletionPort(INVALID_HANDLE_VALUE, NULL, 0, 1)`: a new port no file is tied to. */
  createCompletionPort(): Handle;
  /** `SetInformationJobObject(JobObjectAssociateCompletionPortInformation)`: the job's messages go to `port` with `key`. */
  associateCompletionPort(job: Handle, port: Handle, key: number): boolean;
  /** `GetQueuedCompletionStatus(port, …, 0)` until the port is empty or `max` packets were taken; never waits. */
  takeCompletions(port: Handle, max: number): JobMessage[];
  /** `GetLastError()` right after the call before it. */
  GetLastError(): number;
  AssignProcessToJobObject(job: Handle, process: Handle): boolean;
  /** `QueryInformationJobObject(JobObjectBasicProcessIdList)`, the whole list; undefined when the query fails. */
  jobProcessIds(job: Handle): number[] | undefined;
  TerminateJobObject(job: Handle, exitCode: number): boolean;
  /** `wine_get_version()` from ntdll when running under Wine, else undefined. */
  wineVersion(): string | undefined;
}

/** Access rights and results of the calls above. */
export const PROCESS_TERMINATE = 0x0001;
export const PROCESS_SET_QUOTA = 0x0100;
export const PROCESS_QUERY_INFORMATION = 0x0400;
export const PROCESS_QUERY_LIMITED_INFORMATION = 0x1000;
export const SYNCHRONIZE = 0x0010_0000;
export const WAIT_OBJECT_0 = 0;
export const WAIT_TIMEOUT = 0x102;

/** False for what Windows uses to say "no handle": null, 0 and INVALID_HANDLE_VALUE (−1) in any width. */
export function isValidHandle(handle: Handle): boolean {
  if (handle === null || handle === undefined) return false;
  if (typeof handle === 'number') return handle !== 0 && handle !== -1 && handle !== 0xffff_ffff;
  if (typeof handle === 'bigint') return handle !== 0n && handle !== -1n && handle !== 0xffff_ffff_ffff_ffffn;
  return true;
}

const TH32CS_SNAPPROCESS = 0x2;
/** sizeof(PROCESSENTRY32W) on x64. */
const PROCESSENTRY32W_SIZE = 568;
/** JOBOBJECTINFOCLASS values. */
const JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION = 1;
const JOB_OBJECT_BASIC_PROCESS_ID_LIST = 3;
const JOB_OBJECT_ASSOCIATE_COMPLETION_PORT_INFORMATION = 7;
const JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9;
const JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION = 15;
const ERROR_MORE_DATA = 234;

/** `JOB_OBJECT_LIMIT_*` flags of LimitFlags. */
export const JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x0008;
export const JOB_OBJECT_LIMIT_JOB_MEMORY = 0x0200;
export const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
/** ControlFlags of a CPU rate. */
export const JOB_OBJECT_CPU_RATE_CONTROL_ENABLE = 0x1;
export const JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP = 0x4;
/** The messages of a job's completion port the provider reads. */
export const JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT = 3;
export const JOB_OBJECT_MSG_JOB_MEMORY_LIMIT = 10;

/**
 * sizeof(JOBOBJECT_EXTENDED_LIMIT_INFORMATION) on x64, and its fields' offsets:
 * the BasicLimitInformation (PerProcessUserTimeLimit, PerJobUserTimeLimit,
 * LimitFlags at 16, MinimumWorkingSetSize, MaximumWorkingSetSize,
 * ActiveProcessLimit at 40, Affinity, PriorityClass, SchedulingClass: 64
 * bytes), IoInfo (six ULONGLONGs), then four SIZE_Ts: ProcessMemoryLimit,
 * JobMemoryLimit at 120, PeakProcessMemoryUsed, PeakJobMemoryUsed at 136.
 */
export const EXTENDED_LIMIT_SIZE = 144;
const LIMIT_FLAGS_OFFSET = 16;
const ACTIVE_PROCESS_LIMIT_OFFSET = 40;
const JOB_MEMORY_LIMIT_OFFSET = 120;
const PEAK_JOB_MEMORY_USED_OFFSET = 136;
/** sizeof(JOBOBJECT_BASIC_ACCOUNTING_INFORMATION): four LARGE_INTEGERs (TotalUserTime, TotalKernelTime, this period's two), four DWORDs. */
export const ACCOUNTING_SIZE = 48;
/** sizeof(JOBOBJECT_CPU_RATE_CONTROL_INFORMATION): ControlFlags, then the CpuRate union. */
export const CPU_RATE_SIZE = 8;
/** sizeof(JOBOBJECT_ASSOCIATE_COMPLETION_PORT): CompletionKey, CompletionPort. */
const COMPLETION_PORT_SIZE = 16;

/** The JOBOBJECT_EXTENDED_LIMIT_INFORMATION that sets `limits`. */
export function packJobLimits(limits: Omit<JobLimits, 'peakJobMemoryUsed'>): Buffer {
  const info = Buffer.alloc(EXTENDED_LIMIT_SIZE);
  info.writeUInt32LE(limits.limitFlags, LIMIT_FLAGS_OFFSET);
  info.writeUInt32LE(limits.activeProcessLimit, ACTIVE_PROCESS_LIMIT_OFFSET);
  info.writeBigUInt64LE(limits.jobMemoryLimit, JOB_MEMORY_LIMIT_OFFSET);
  return info;
}

export function unpackJobLimits(info: Buffer): JobLimits {
  return {
    limitFlags: info.readUInt32LE(LIMIT_FLAGS_OFFSET),
    activeProcessLimit: info.readUInt32LE(ACTIVE_PROCESS_LIMIT_OFFSET),
    jobMemoryLimit: info.readBigUInt64LE(JOB_MEMORY_LIMIT_OFFSET),
    peakJobMemoryUsed: info.readBigUInt64LE(PEAK_JOB_MEMORY_USED_OFFSET),
  };
}

export function unpackJobAccounting(info: Buffer): JobAccounting {
  return {
    totalUserTime: info.readBigInt64LE(0),
    totalKernelTime: info.readBigInt64LE(8),
    totalProcesses: info.readUInt32LE(36),
    activeProcesses: info.readUInt32LE(40),
  };
}

export function packJobCpuRate(rate: JobCpuRate): Buffer {
  const info = Buffer.alloc(CPU_RATE_SIZE);
  info.writeUInt32LE(rate.controlFlags, 0);
  info.writeUInt32LE(rate.cpuRate, 4);
  return info;
}

export function unpackJobCpuRate(info: Buffer): JobCpuRate {
  return { controlFlags: info.readUInt32LE(0), cpuRate: info.readUInt32LE(4) };
}

let loaded: Kernel32 | undefined;

/**
 * The real calls, bound on first use.
 * @throws when not on Windows, or when koffi or kernel32 cannot be loaded.
 */
export function loadKernel32(): Kernel32 {
  if (loaded !== undefined) return loaded;
  if (!hostFacts.kernel32) throw new Error(`kernel32 exists only on Windows, not ${HOST_PLATFORM}`);
  const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
  const kernel32 = koffi.load('kernel32.dll');
  const entryType = koffi.struct('EXECWORLD_PROCESSENTRY32W', {
    dwSize: 'uint32',
    cntUsage: 'uint32',
    th32ProcessID: 'uint32',
    th32DefaultHeapID: 'uintptr',
    th32ModuleID: 'uint32',
    cntThreads: 'uint32',
    th32ParentProcessID: 'uint32',
    pcPriClassBase: 'int32',
    dwFlags: 'uint32',
    szExeFile: koffi.array('char16', 260, 'String'),
  });
  if (koffi.sizeof(entryType) !== PROCESSENTRY32W_SIZE) throw new Error(`PROCESSENTRY32W is ${koffi.sizeof(entryType)} bytes, not ${PROCESSENTRY32W_SIZE}`);
  const createSnapshot = kernel32.func('void *CreateToolhelp32Snapshot(uint32 flags, uint32 pid)');
  const processFirst = kernel32.func('bool Process32FirstW(void *snapshot, _Inout_ EXECWORLD_PROCESSENTRY32W *entry)');
  const processNext = kernel32.func('bool Process32NextW(void *snapshot, _Inout_ EXECWORLD_PROCESSENTRY32W *entry)');
  const openProcess = kernel32.func('void *OpenProcess(uint32 access, bool inherit, uint32 pid)');
  const getProcessTimes = kernel32.func(
    'bool GetProcessTimes(void *process, _Out_ uint64 *creation, _Out_ uint64 *exit, _Out_ uint64 *kernel, _Out_ uint64 *user)',
  );
  const waitForSingleObject = kernel32.func('uint32 WaitForSingleObject(void *handle, uint32 milliseconds)');
  const terminateProcess = kernel32.func('bool TerminateProcess(void *process, uint32 code)');
  const closeHandle = kernel32.func('bool CloseHandle(void *handle)');
  const createJobObject = kernel32.func('void *CreateJobObjectW(void *attributes, void *name)');
  const setInformationJobObject = kernel32.func('bool SetInformationJobObject(void *job, int infoClass, void *info, uint32 length)');
  const assignProcessToJobObject = kernel32.func('bool AssignProcessToJobObject(void *job, void *process)');
  const queryInformationJobObject = kernel32.func('bool QueryInformationJobObject(void *job, int infoClass, _Out_ void *info, uint32 length, void *returned)');
  const terminateJobObject = kernel32.func('bool TerminateJobObject(void *job, uint32 code)');
  const getLastError = kernel32.func('uint32 GetLastError()');
  const createIoCompletionPort = kernel32.func('void *CreateIoCompletionPort(void *file, void *existing, uintptr key, uint32 threads)');
  const getQueuedCompletionStatus = kernel32.func(
    'bool GetQueuedCompletionStatus(void *port, _Out_ uint32 *bytes, _Out_ uintptr *key, _Out_ uintptr *overlapped, uint32 milliseconds)',
  );
  /** Fills `info` of `infoClass`, or says the query failed. */
  const query = (job: Handle, infoClass: number, size: number): Buffer | undefined => {
    const info = Buffer.alloc(size);
    return (queryInformationJobObject(job, infoClass, info, info.length, null) as boolean) ? info : undefined;
  };
  let wine: string | undefined;
  try {
    wine = koffi.load('ntdll.dll').func('const char *wine_get_version()')() as string;
  } catch (_notWine) {
    wine = undefined;
  }

  loaded = {
    processEntries() {
      const snapshot = createSnapshot(TH32CS_SNAPPROCESS, 0) as Handle;
      if (!isValidHandle(snapshot)) return undefined;
      try {
        const entry = { dwSize: PROCESSENTRY32W_SIZE } as { dwSize: number; th32ProcessID: number; th32ParentProcessID: number; szExeFile: string };
        const rows: ProcessEntry[] = [];
        if (!(processFirst(snapshot, entry) as boolean)) return rows;
        do {
          rows.push({ pid: entry.th32ProcessID, ppid: entry.th32ParentProcessID, name: entry.szExeFile });
          entry.dwSize = PROCESSENTRY32W_SIZE;
        } while (processNext(snapshot, entry) as boolean);
        return rows;
      } finally {
        closeHandle(snapshot);
      }
    },
    OpenProcess: (access, pid) => openProcess(access, false, pid) as Handle,
    processCreationTime(handle) {
      const creation = [0n];
      const none = [0n];
      if (!(getProcessTimes(handle, creation, [0n], none, [0n]) as boolean)) return undefined;
      return BigInt(creation[0]!);
    },
    WaitForSingleObject: (handle, milliseconds) => waitForSingleObject(handle, milliseconds) as number,
    TerminateProcess: (handle, code) => terminateProcess(handle, code) as boolean,
    CloseHandle: (handle) => closeHandle(handle) as boolean,
    CreateJobObject: () => createJobObject(null, null) as Handle,
    setJobLimits(job, limits) {
      const info = packJobLimits(limits);
      return setInformationJobObject(job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, info, info.length) as boolean;
    },
    jobLimits(job) {
      const info = query(job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, EXTENDED_LIMIT_SIZE);
      return info === undefined ? undefined : unpackJobLimits(info);
    },
    setJobCpuRate(job, rate) {
      const info = packJobCpuRate(rate);
      return setInformationJobObject(job, JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION, info, info.length) as boolean;
    },
    jobCpuRate(job) {
      const info = query(job, JOB_OBJECT_CPU_RATE_CONTROL_INFORMATION, CPU_RATE_SIZE);
      return info === undefined ? undefined : unpackJobCpuRate(info);
    },
    jobAccounting(job) {
      const info = query(job, JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION, ACCOUNTING_SIZE);
      return info === undefined ? undefined : unpackJobAccounting(info);
    },
    createCompletionPort: () => createIoCompletionPort(koffi.as(-1n, 'void *'), null, 0, 1) as Handle,
    associateCompletionPort(job, port, key) {
      const info = Buffer.alloc(COMPLETION_PORT_SIZE);
      info.writeBigUInt64LE(BigInt(key), 0);
      info.writeBigUInt64LE(BigInt(koffi.address(port)), 8);
      return setInformationJobObject(job, JOB_OBJECT_ASSOCIATE_COMPLETION_PORT_INFORMATION, info, info.length) as boolean;
    },
    takeCompletions(port, max) {
      const taken: JobMessage[] = [];
      while (taken.length < max) {
        const message = [0];
        const key = [0];
        const overlapped = [0];
        if (!(getQueuedCompletionStatus(port, message, key, overlapped, 0) as boolean)) break;
        taken.push({ message: message[0]!, key: Number(key[0]), pid: Number(overlapped[0]) });
      }
      return taken;
    },
    GetLastError: () => getLastError() as number,
    AssignProcessToJobObject: (job, handle) => assignProcessToJobObject(job, handle) as boolean,
    jobProcessIds(job) {
      // NumberOfAssignedProcesses, NumberOfProcessIdsInList, then one ULONG_PTR per process.
      for (let capacity = 64; capacity <= 1 << 20; capacity *= 4) {
        const list = Buffer.alloc(8 + 8 * capacity);
        const ok = queryInformationJobObject(job, JOB_OBJECT_BASIC_PROCESS_ID_LIST, list, list.length, null) as boolean;
        if (!ok && (getLastError() as number) !== ERROR_MORE_DATA) return undefined;
        const assigned = list.readUInt32LE(0);
        const listed = list.readUInt32LE(4);
        if (ok && listed >= assigned) return Array.from({ length: listed }, (_, index) => Number(list.readBigUInt64LE(8 + 8 * index)));
      }
      return undefined;
    },
    TerminateJobObject: (job, code) => terminateJobObject(job, code) as boolean,
    wineVersion: () => wine,
  };
  return loaded;
}
