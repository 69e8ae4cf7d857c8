/**
 * What `/proc` says, read and parsed: the stat line, a blocked thread's
 * syscall and its arguments, the wait-family syscall numbers per
 * architecture, and the injectable source of every `/proc` read. The Linux
 * inspector (`linux.ts`) draws its conclusions from these.
 * @module
 */
import { closeSync, openSync, readSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { kernelTextOrUndefined } from '../kernel-text.ts';

/** The fields of `/proc/<pid>/stat` the provider uses. */
export interface ProcStat {
  readonly pid: number;
  /** The command name (field 2, without its parentheses; at most 15 bytes). */
  readonly name: string;
  readonly state: string;
  readonly ppid: number;
  readonly pgrp: number;
  readonly session: number;
  /** Device number of the controlling terminal (field 7), 0 when none. */
  readonly ttyNr: number;
  /** Foreground group of the controlling terminal (field 8), -1 when none. */
  readonly tpgid: number;
  /** Start time in clock ticks since boot (field 22), kept as text. */
  readonly starttime: string;
}

/**
 * Parses one `/proc/<pid>/stat` line. The command name sits between the first
 * `(` and the last `)`, so names holding spaces or parentheses parse.
 * @returns undefined when the line is malformed.
 */
export function parseStat(text: string): ProcStat | undefined {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open <= 0 || close < open) return undefined;
  const pid = Number(text.slice(0, open).trim());
  const fields = text
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  // fields[0] is proc(5) field 3.
  const state = fields[0];
  const ints = [pid, Number(fields[1]), Number(fields[2]), Number(fields[3]), Number(fields[4]), Number(fields[5])];
  const starttime = fields[19];
  if (state?.length !== 1 || starttime === undefined || !/^\d+$/.test(starttime)) return undefined;
  if (!ints.every((value) => Number.isSafeInteger(value))) return undefined;
  const [, ppid, pgrp, session, ttyNr, tpgid] = ints as [number, number, number, number, number, number];
  return { pid, name: text.slice(open + 1, close), state, ppid, pgrp, session, ttyNr, tpgid, starttime };
}

/** True for the states of a process that has ended: zombie, dead. */
export function isEndedState(state: string): boolean {
  return state === 'Z' || state === 'X' || state === 'x';
}

/** A blocked thread's syscall: its number and six raw arguments. */
export interface BlockedSyscall {
  readonly nr: number;
  /**
   * The six argument registers as unsigned 64-bit values. Registers a syscall
   * does not use hold whatever the caller left in them (`less` blocks in read
   * with a 64-bit garbage value in the fourth), so nothing may be required of
   * them; each wait shape checks only the arguments it reads.
   */
  readonly args: readonly [bigint, bigint, bigint, bigint, bigint, bigint];
}

/**
 * Parses `/proc/<pid>/task/<tid>/syscall`: `running`, `-1 <sp> <pc>` (blocked
 * outside a syscall), or the decimal syscall number, six hex arguments, sp, pc.
 * @returns undefined when the text is no evidence of a blocked syscall.
 */
export function parseSyscall(text: string): BlockedSyscall | undefined {
  const fields = text.trim().split(/\s+/);
  if (fields.length < 7 || !/^\d+$/.test(fields[0] ?? '')) return undefined;
  const nr = Number(fields[0]);
  const hex = fields.slice(1, 7).map((field) => /^(?:0x)?0*([0-9a-f]{1,16})$/i.exec(field)?.[1]);
  if (!Number.isSafeInteger(nr) || !hex.every((digits) => digits !== undefined)) return undefined;
  return { nr, args: hex.map((digits) => BigInt(`0x${digits}`)) as unknown as BlockedSyscall['args'] };
}

/**
 * An fd or count argument as a number, or undefined when it is no non-negative
 * C `int` of at least `min`. The kernel would take only the low 32 bits of such
 * a register, but a value with more bits set is no proof to rest on: fail closed.
 */
export function intArg(value: bigint, min: number): number | undefined {
  return value >= BigInt(min) && value <= 0x7fff_ffffn ? Number(value) : undefined;
}

/** How a syscall's arguments name the file descriptors it waits on. */
export type WaitShape = 'read' | 'select' | 'poll' | 'epoll';

/** Syscall numbers by architecture. Architectures not listed never prove a wait. */
export const WAIT_SYSCALLS: Readonly<Record<string, ReadonlyMap<number, WaitShape>>> = {
  x64: new Map<number, WaitShape>([
    [0, 'read'],
    [19, 'read'], // readv
    [23, 'select'],
    [270, 'select'], // pselect6
    [7, 'poll'],
    [271, 'poll'], // ppoll
    [232, 'epoll'], // epoll_wait
    [281, 'epoll'], // epoll_pwait
    [441, 'epoll'], // epoll_pwait2
  ]),
  arm64: new Map<number, WaitShape>([
    [63, 'read'],
    [65, 'read'], // readv
    [72, 'select'], // pselect6
    [73, 'poll'], // ppoll
    [22, 'epoll'], // epoll_pwait
    [441, 'epoll'], // epoll_pwait2
  ]),
};

/** Largest fd set or pollfd array read from a process's memory. */
export const MAX_WAIT_FDS = 1024;
export const POLLIN = 0x001;

/** The pieces of `/proc` the inspector reads; injectable for tests. */
export interface ProcSource {
  /** Numeric entries of `/proc`. */
  pids(): number[];
  stat(pid: number): string | undefined;
  tasks(pid: number): number[];
  syscall(pid: number, tid: number): string | undefined;
  /** Voluntary plus involuntary context switches of a thread, as text. */
  switches(pid: number, tid: number): string | undefined;
  /** `length` bytes of a process's memory at a user-space address, which may be any 64-bit value. */
  memory(pid: number, address: bigint, length: number): Buffer | undefined;
  fdinfo(pid: number, fd: number): string | undefined;
  /** The text of `/proc/uptime`. */
  uptime(): string | undefined;
  /** What `/proc/<pid>/fd/<fd>` refers to: its target path and device number. */
  fdTarget(pid: number, fd: number): { path: string; rdev: number } | undefined;
  /** The device number of a terminal path. */
  deviceOf(path: string): number | undefined;
}

/** Largest position Node's readSync accepts (off_t is signed). */
const MAX_MEMORY_POSITION = (1n << 63n) - 1n;

function numericEntries(path: string): number[] {
  try {
    return readdirSync(path)
      .filter((name) => /^\d+$/.test(name))
      .map(Number);
  } catch (_error) {
    return [];
  }
}

/** The real `/proc`. */
export const hostProc: ProcSource = {
  pids: () => numericEntries('/proc'),
  stat: (pid) => kernelTextOrUndefined(`/proc/${pid}/stat`),
  tasks: (pid) => numericEntries(`/proc/${pid}/task`),
  syscall: (pid, tid) => kernelTextOrUndefined(`/proc/${pid}/task/${tid}/syscall`),
  switches(pid, tid) {
    const status = kernelTextOrUndefined(`/proc/${pid}/task/${tid}/status`);
    if (status === undefined) return undefined;
    const voluntary = /^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1];
    const involuntary = /^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1];
    return voluntary === undefined || involuntary === undefined ? undefined : `${voluntary}.${involuntary}`;
  },
  memory(pid, address, length) {
    // readSync takes a bigint position, so addresses at 2^53 and above are read
    // exactly; it refuses 2^63 and above (a negative off_t would make libuv read
    // at the current offset instead), which x64 user space never reaches and a
    // tagged arm64 pointer is then simply no proof.
    if (address < 0n || address > MAX_MEMORY_POSITION - BigInt(length)) return undefined;
    let fd: number | undefined;
    try {
      fd = openSync(`/proc/${pid}/mem`, 'r');
      const buffer = Buffer.alloc(length);
      const read = readSync(fd, buffer, 0, length, address);
      return read === length ? buffer : undefined;
    } catch (_error) {
      return undefined;
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  },
  fdinfo: (pid, fd) => kernelTextOrUndefined(`/proc/${pid}/fdinfo/${fd}`),
  uptime: () => kernelTextOrUndefined('/proc/uptime'),
  fdTarget(pid, fd) {
    try {
      const path = readlinkSync(`/proc/${pid}/fd/${fd}`);
      return { path, rdev: statSync(`/proc/${pid}/fd/${fd}`).rdev };
    } catch (_error) {
      return undefined;
    }
  },
  deviceOf(path) {
    try {
      return statSync(path).rdev;
    } catch (_error) {
      return undefined;
    }
  },
};
