/**
 * The Linux inspector over injected /proc text, for the cases a real system
 * cannot be made to show on purpose.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { hostProc, parseStat, parseSyscall, type ProcSource } from '../../service/src/provider/inspect/linux-proc.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { ProcessIndex } from '../../service/src/provider/inspect/inspector.ts';

const PTS = { path: '/dev/pts/7' };
const PTS_RDEV = (136 << 8) | 7;

interface FakeProcess {
  pid: number;
  ppid?: number;
  pgrp: number;
  session?: number;
  state?: string;
  start?: number;
  comm?: string;
  /** tid -> syscall file text */
  threads?: Record<number, string>;
  fds?: Record<number, { path: string; rdev: number }>;
  fdinfo?: Record<number, string>;
  /** Buffers by their address in decimal, which number keys such as 0x6000 already are. */
  memory?: Record<string, Buffer>;
}

function stat(p: FakeProcess): string {
  const fields = [p.state ?? 'S', p.ppid ?? 1, p.pgrp, p.session ?? p.pgrp, PTS_RDEV, p.pgrp, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 1, p.start ?? 1000];
  return `${p.pid} (${p.comm ?? 'proc'}) ${fields.join(' ')} 0 0 0\n`;
}

function fakeProc(processes: FakeProcess[], uptime = '50.00 10.00'): ProcSource {
  const byPid = new Map(processes.map((p) => [p.pid, p]));
  return {
    pids: () => processes.map((p) => p.pid),
    stat: (pid) => (byPid.has(pid) ? stat(byPid.get(pid)!) : undefined),
    tasks: (pid) => Object.keys(byPid.get(pid)?.threads ?? { [pid]: '' }).map(Number),
    syscall: (pid, tid) => byPid.get(pid)?.threads?.[tid],
    switches: () => '1.0',
    memory: (pid, address, length) => {
      const buffer = byPid.get(pid)?.memory?.[address.toString()];
      return buffer !== undefined && buffer.length >= length ? buffer.subarray(0, length) : undefined;
    },
    fdinfo: (pid, fd) => byPid.get(pid)?.fdinfo?.[fd],
    fdTarget: (pid, fd) => byPid.get(pid)?.fds?.[fd] ?? (fd <= 2 ? { path: PTS.path, rdev: PTS_RDEV } : undefined),
    deviceOf: (path) => (path === PTS.path ? PTS_RDEV : undefined),
    uptime: () => uptime,
  };
}

const x64 = (processes: FakeProcess[]): LinuxInspector => new LinuxInspector({ proc: fakeProc(processes), arch: 'x64' });
const call = (nr: number, ...args: (number | bigint)[]): string =>
  `${nr} ${[...args, 0, 0, 0, 0, 0, 0]
    .slice(0, 6)
    .map((a) => `0x${a.toString(16)}`)
    .join(' ')} 0x7ffd0000 0x7f000000\n`;
const pollfd = (...entries: [fd: number, events: number][]): Buffer => {
  const buffer = Buffer.alloc(entries.length * 8);
  entries.forEach(([fd, events], index) => {
    buffer.writeInt32LE(fd, index * 8);
    buffer.writeInt16LE(events, index * 8 + 4);
  });
  return buffer;
};

/**
 * Recorded on Debian 12 x64 from `seq 1 300 | less` with TERM=dumb on a pty
 * (`script -qc`): read(3, buf, 1) where fd 3 is the terminal (/dev/tty) and fd
 * 0 the pipe. The fourth register, unused by read, holds 0xeca70f01b5e7bb72.
 */
const LESS_READ = '0 0x3 0x7ffc3c9460d7 0x1 0xeca70f01b5e7bb72 0x7 0x5624af6fa5d0 0x7ffc3c945ff8 0x7f3c39ae92ad\n';
const less: FakeProcess = {
  pid: 10,
  pgrp: 10,
  threads: { 10: LESS_READ },
  fds: { 0: { path: 'pipe:[14536]', rdev: 0 }, 3: { path: PTS.path, rdev: PTS_RDEV } },
};
/** fd entries naming the terminal, for fds a faulty conversion of a register would produce. */
const terminalAt = (...fds: number[]): Record<number, { path: string; rdev: number }> =>
  Object.fromEntries(fds.map((fd) => [fd, { path: PTS.path, rdev: PTS_RDEV }]));
/** An epoll fdinfo watching fd 0. */
const WATCHES_0 = 'tfd:        0 events: 19\n';
/** Addresses a double cannot hold exactly: 2^53 + 1 rounds to 2^53. */
const HIGH = 2n ** 53n + 1n;
const HIGHER = 2n ** 62n + 0x6001n;

describe('parseStat', () => {
  it('finds the command name by the first ( and the last )', () => {
    const parsed = parseStat('42 (command with space) S 1 42 42 34823 42 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n');
    expect(parsed).toMatchObject({ pid: 42, state: 'S', ppid: 1, pgrp: 42, session: 42, tpgid: 42, starttime: '777' });
    expect(parseStat('43 (a) (b)) R 1 43 43 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0\n')).toMatchObject({ pid: 43, state: 'R', tpgid: -1 });
  });

  it('rejects malformed lines', () => {
    expect(parseStat('(x) S 1 2 3 4 5 0 0 0 0 0 0 0 0 0 20 0 1 0 7')).toBeUndefined();
    expect(parseStat('42 no-parens S 1')).toBeUndefined();
    expect(parseStat('42 (x) SS 1 42 42 0 42 0 0 0 0 0 0 0 0 0 20 0 1 0 7')).toBeUndefined();
    expect(parseStat('42 (x) S 1 42')).toBeUndefined();
  });
});

describe('parseSyscall', () => {
  it('accepts a blocked syscall and refuses running or outside-syscall states', () => {
    expect(parseSyscall(call(0, 0, 0x1000, 1))).toMatchObject({ nr: 0, args: [0n, 0x1000n, 1n, 0n, 0n, 0n] });
    expect(parseSyscall('running\n')).toBeUndefined();
    expect(parseSyscall('-1 0x7ffd 0x7f00\n')).toBeUndefined();
    expect(parseSyscall('0 0xzz 0 0 0 0 0 0 0')).toBeUndefined();
    expect(parseSyscall('')).toBeUndefined();
  });

  it('accepts garbage of any 64-bit value in registers, as less leaves in the ones read does not use', () => {
    // The old parser turned each register into a double and refused the line
    // unless every one was a safe integer, which this recorded line is not.
    const registers = LESS_READ.trim().split(' ').slice(1, 7);
    expect(registers.some((field) => !Number.isSafeInteger(Number.parseInt(field, 16)))).toBe(true);
    expect(parseSyscall(LESS_READ)).toEqual({ nr: 0, args: [3n, 0x7ffc3c9460d7n, 1n, 0xeca70f01b5e7bb72n, 7n, 0x5624af6fa5d0n] });
    expect(parseSyscall('7 0xffffffffffffffff 0 0 0 0 0 0 0')?.args[0]).toBe(2n ** 64n - 1n);
  });

  it('refuses a register wider than 64 bits', () => {
    expect(parseSyscall('0 0x10000000000000000 0 0 0 0 0 0 0')).toBeUndefined();
    expect(parseSyscall('0 0 0 0 0 0x1ffffffffffffffff 0 0 0')).toBeUndefined();
  });
});

describe('LinuxInspector.inputWait', () => {
  const waiting = (p: FakeProcess, inspector = x64([p])): boolean => inspector.inputWait(p.pgrp, PTS) !== undefined;

  it('proves read(0)', () => {
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(0, 0, 0x5000, 1024) } })).toBe(true);
  });

  it('proves pselect6 with fd 0 in the read set', () => {
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(270, 1, 0x6000) }, memory: { 0x6000: Buffer.from([1, 0, 0, 0, 0, 0, 0, 0]) } })).toBe(true);
  });

  it('proves poll with fd 0 and POLLIN', () => {
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(7, 0x7000, 1) }, memory: { 0x7000: pollfd([0, 1]) } })).toBe(true);
  });

  it('proves epoll_wait with fd 0 registered', () => {
    expect(
      waiting({ pid: 10, pgrp: 10, threads: { 10: call(232, 5, 0x8000, 1) }, fdinfo: { 5: 'pos:\t0\nflags:\t02\ntfd:        0 events:       19 data: 0\n' } }),
    ).toBe(true);
  });

  it('proves a wait on a non-leader thread only', () => {
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(202, 0x10), 11: call(0, 0, 0x5000, 1) } })).toBe(true);
  });

  it('proves a read of a dup of the terminal and of /dev/tty (controlling terminal)', () => {
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(0, 9, 0x5000, 1) }, fds: { 9: { path: PTS.path, rdev: PTS_RDEV } } })).toBe(true);
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(0, 3, 0x5000, 1) }, fds: { 3: { path: '/dev/tty', rdev: 5 << 8 } } })).toBe(true);
  });

  it('proves readv and epoll_pwait2, which the reference misses', () => {
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(19, 0, 0x5000, 1) } })).toBe(true);
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(441, 5, 0x8000, 4) }, fdinfo: { 5: 'tfd:        0 events: 19\n' } })).toBe(true);
  });

  it('proves less reading the terminal with a 64-bit value in an unused register (recorded)', () => {
    expect(waiting(less)).toBe(true);
    // The same line read from the pipe on fd 0 instead is no wait for the terminal.
    expect(waiting({ ...less, threads: { 10: LESS_READ.replace('0 0x3 ', '0 0x0 ') } })).toBe(false);
  });

  it('reads fd sets and pollfd arrays at addresses of 2^53 and more exactly', () => {
    const set = Buffer.from([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(270, 1, HIGH) }, memory: { [HIGH.toString()]: set } })).toBe(true);
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(7, HIGHER, 1) }, memory: { [HIGHER.toString()]: pollfd([0, 1]) } })).toBe(true);
    // The address rounded to a double is another address, with nothing there.
    expect(waiting({ pid: 10, pgrp: 10, threads: { 10: call(270, 1, HIGH) }, memory: { [String(Number(HIGH))]: set } })).toBe(false);
  });

  it('uses the arm64 numbers on arm64', () => {
    const p: FakeProcess = { pid: 10, pgrp: 10, threads: { 10: call(63, 0, 0x5000, 1) } };
    expect(new LinuxInspector({ proc: fakeProc([p]), arch: 'arm64' }).inputWait(10, PTS)).toBeDefined();
    expect(waiting(p)).toBe(false); // 63 is not read on x64
  });

  it.each<[string, FakeProcess]>([
    ['read(2)', { pid: 10, pgrp: 10, threads: { 10: call(0, 2, 0x5000, 1) }, fds: { 2: { path: '/tmp/log', rdev: 0 } } }],
    ['fd 0 that is a pipe', { pid: 10, pgrp: 10, threads: { 10: call(0, 0, 0x5000, 1) }, fds: { 0: { path: 'pipe:[123]', rdev: 0 } } }],
    ['pselect with a null set', { pid: 10, pgrp: 10, threads: { 10: call(270, 1, 0) } }],
    ['pselect without fd 0', { pid: 10, pgrp: 10, threads: { 10: call(270, 1, 0x6000) }, memory: { 0x6000: Buffer.from([2, 0, 0, 0, 0, 0, 0, 0]) } }],
    ['poll with nfds 0', { pid: 10, pgrp: 10, threads: { 10: call(7, 0x7000, 0) }, memory: { 0x7000: pollfd([0, 1]) } }],
    ['poll with a null array', { pid: 10, pgrp: 10, threads: { 10: call(7, 0, 1) } }],
    [
      'poll on fd 2 only',
      { pid: 10, pgrp: 10, threads: { 10: call(7, 0x7000, 1) }, memory: { 0x7000: pollfd([2, 1]) }, fds: { 2: { path: '/tmp/x', rdev: 0 } } },
    ],
    ['poll without POLLIN', { pid: 10, pgrp: 10, threads: { 10: call(7, 0x7000, 1) }, memory: { 0x7000: pollfd([0, 4]) } }],
    ['epoll without fd 0', { pid: 10, pgrp: 10, threads: { 10: call(232, 5, 0x8000, 1) }, fdinfo: { 5: 'tfd:        4 events: 19\n' } }],
    ['an unknown syscall', { pid: 10, pgrp: 10, threads: { 10: call(35, 0x10) } }],
    ['a running thread', { pid: 10, pgrp: 10, threads: { 10: 'running\n' } }],
    ['an unreadable syscall file', { pid: 10, pgrp: 10, threads: {} }],
    ['unreadable memory', { pid: 10, pgrp: 10, threads: { 10: call(270, 1, 0x6000) } }],
    ['unreadable fdinfo', { pid: 10, pgrp: 10, threads: { 10: call(232, 5, 0x8000, 1) } }],
    ['a zombie', { pid: 10, pgrp: 10, state: 'Z', threads: { 10: call(0, 0, 0x5000, 1) } }],
    // The kernel reads only the low 32 bits of an int argument; a register with more set is no proof,
    // neither by its low bits nor as a double, though both name a terminal or a watched fd here.
    ['read of an fd wider than an int', { pid: 10, pgrp: 10, threads: { 10: call(0, 2n ** 32n, 0x5000, 1) }, fds: terminalAt(2 ** 32) }],
    ['read of fd -1', { pid: 10, pgrp: 10, threads: { 10: call(0, 2n ** 64n - 1n, 0x5000, 1) }, fds: terminalAt(2 ** 64, 2 ** 32 - 1) }],
    [
      'pselect with nfds wider than an int',
      { pid: 10, pgrp: 10, threads: { 10: call(270, 2n ** 32n + 1n, 0x6000) }, memory: { 0x6000: Buffer.alloc(128, 0xff) } },
    ],
    [
      'poll with nfds wider than an int',
      { pid: 10, pgrp: 10, threads: { 10: call(7, 0x7000, 2n ** 32n + 1n) }, memory: { 0x7000: Buffer.concat([pollfd([0, 1]), Buffer.alloc(8 * 1024)]) } },
    ],
    [
      'epoll on an epfd wider than an int',
      { pid: 10, pgrp: 10, threads: { 10: call(232, 2n ** 32n + 5n, 0x8000, 1) }, fdinfo: { 5: WATCHES_0, [2 ** 32 + 5]: WATCHES_0 } },
    ],
    ['epoll with maxevents 0', { pid: 10, pgrp: 10, threads: { 10: call(232, 5, 0x8000, 0) }, fdinfo: { 5: WATCHES_0 } }],
    ['epoll with maxevents wider than an int', { pid: 10, pgrp: 10, threads: { 10: call(232, 5, 0x8000, 2n ** 64n - 1n) }, fdinfo: { 5: WATCHES_0 } }],
  ])('does not prove %s', (_name, p) => {
    expect(waiting(p)).toBe(false);
  });

  it('ignores a process in another group, and an architecture without a table', () => {
    const p: FakeProcess = { pid: 10, pgrp: 11, threads: { 10: call(0, 0, 0x5000, 1) } };
    expect(x64([p]).inputWait(10, PTS)).toBeUndefined();
    const mips = new LinuxInspector({ proc: fakeProc([{ ...p, pgrp: 10 }]), arch: 'mips' });
    expect(mips.exactInputWait).toBe(false);
    expect(mips.inputWait(10, PTS)).toBeUndefined();
  });

  it('falls back to fd 0 when the terminal is not known', () => {
    const p: FakeProcess = { pid: 10, pgrp: 10, threads: { 10: call(0, 0, 0x5000, 1) } };
    expect(x64([p]).inputWait(10, undefined)).toBeDefined();
    expect(x64([{ ...p, threads: { 10: call(0, 3, 0x5000, 1) } }]).inputWait(10, undefined)).toBeUndefined();
  });
});

describe('hostProc.memory', () => {
  it('reads this process at a bigint address, and refuses addresses readSync cannot take without throwing', () => {
    // The first mapping of the node binary starts with its ELF header.
    const exe = readlinkSync('/proc/self/exe');
    const mapping = readFileSync('/proc/self/maps', 'latin1')
      .split('\n')
      .find((line) => line.endsWith(` ${exe}`) && / 00000000 /.test(line));
    expect(mapping).toBeDefined();
    const start = BigInt(`0x${mapping!.split('-')[0]!}`);
    expect(hostProc.memory(process.pid, start, 4)?.toString('latin1')).toBe('\x7fELF');
    expect(hostProc.memory(process.pid, HIGH, 4)).toBeUndefined();
    expect(hostProc.memory(process.pid, 2n ** 63n, 4)).toBeUndefined();
    expect(hostProc.memory(process.pid, 2n ** 64n - 1n, 4)).toBeUndefined();
  });
});

describe('LinuxInspector tables', () => {
  const table = x64([
    { pid: 100, ppid: 1, pgrp: 100, session: 100, start: 5 },
    { pid: 101, ppid: 100, pgrp: 101, session: 100, start: 6 },
    { pid: 102, ppid: 101, pgrp: 101, session: 100, start: 7 },
    { pid: 103, ppid: 1, pgrp: 103, session: 100, start: 8, state: 'Z' },
    { pid: 200, ppid: 1, pgrp: 200, session: 200, start: 9 },
  ]);

  it('walks trees children first with the root last', () => {
    const index = new ProcessIndex(table.snapshot());
    expect(index.tree({ pid: 100, started: '5' }).map((row) => row.identity.pid)).toEqual([102, 101, 100]);
    expect(index.tree({ pid: 100, started: '4' })).toEqual([]);
    expect(index.tree({ pid: 999, started: '1' })).toEqual([]);
  });

  it('survives a parent cycle', () => {
    const cyclic = x64([
      { pid: 1, ppid: 2, pgrp: 1, start: 1 },
      { pid: 2, ppid: 1, pgrp: 1, start: 1 },
    ]);
    expect(new ProcessIndex(cyclic.snapshot()).tree({ pid: 1, started: '1' }).map((row) => row.identity.pid)).toEqual([2, 1]);
  });

  it('fences liveness on the start time and leaves zombies out', () => {
    expect(table.isAlive({ pid: 101, started: '6' })).toBe(true);
    expect(table.isAlive({ pid: 101, started: '5' })).toBe(false);
    expect(table.isAlive({ pid: 103, started: '8' })).toBe(false);
    expect(table.identity(103)).toBeUndefined();
    expect(table.signalProcess({ pid: 101, started: '5' }, 'SIGTERM')).toBe(false);
  });

  it('reports a group of zombies as having no live member, and an unknown group as unknown', () => {
    expect(table.groupHasLiveMembers(101)).toBe(true);
    expect(table.groupHasLiveMembers(103)).toBe(false);
    expect(table.groupHasLiveMembers(555)).toBeUndefined();
  });

  it('reads the foreground group from tpgid, none when it is -1', () => {
    expect(table.foregroundGroup(101)).toBe(101);
    const detached = x64([{ pid: 300, pgrp: -1 }]);
    expect(detached.foregroundGroup(300)).toBeUndefined();
  });

  it('tells the time in start-time ticks', () => {
    expect(new LinuxInspector({ proc: fakeProc([], '12.34 1.00') }).nowTicks()).toBe(1235);
  });
});
