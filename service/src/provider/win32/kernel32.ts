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
  /** `SetInformationJobObject(JobObjectExtendedLimitInformation)` with only `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`. */
  setKillOnJobClose(job: Handle): boolean;
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
const JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9;
const JOB_OBJECT_BASIC_PROCESS_ID_LIST = 3;
/** sizeof(JOBOBJECT_EXTENDED_LIMIT_INFORMATION) on x64, and where LimitFlags sits in it. */
const EXTENDED_LIMIT_SIZE = 144;
const LIMIT_FLAGS_OFFSET = 16;
const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
const ERROR_MORE_DATA = 234;

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
    setKillOnJobClose(job) {
      const info = Buffer.alloc(EXTENDED_LIMIT_SIZE);
      info.writeUInt32LE(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, LIMIT_FLAGS_OFFSET);
      return setInformationJobObject(job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, info, info.length) as boolean;
    },
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
