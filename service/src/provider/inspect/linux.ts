/**
 * The Linux inspector: everything is read from `/proc`.
 *
 * Exact input-wait proof: a thread of the foreground group is blocked in a
 * read-family or wait-family syscall whose file descriptors include one that
 * refers to the group's terminal. `/proc/<pid>/task/<tid>/syscall` gives the
 * syscall number and raw arguments of a blocked thread; for select and poll the
 * fd sets are read from `/proc/<pid>/mem`, for epoll the registered fds from
 * `/proc/<pid>/fdinfo/<epfd>`. Reading another process's `syscall` and `mem`
 * needs ptrace-read access to it; where that is denied (Yama ptrace_scope 2+,
 * seccomp, another uid without CAP_SYS_PTRACE) the proof is simply absent.
 * @module
 */
import type { InputWait, ProcessIdentity, ProcessInspector, ProcessRow, TerminalDevice } from './inspector.ts';
import {
  hostProc,
  intArg,
  isEndedState,
  MAX_WAIT_FDS,
  parseStat,
  parseSyscall,
  POLLIN,
  WAIT_SYSCALLS,
  type BlockedSyscall,
  type ProcSource,
  type ProcStat,
  type WaitShape,
} from './linux-proc.ts';

/**
 * Clock ticks per second of `/proc/<pid>/stat` start times. USER_HZ is 100 on
 * every architecture Linux runs Node on.
 */
const CLOCK_TICKS_PER_SECOND = 100;

/** Device number of `/dev/tty`, the alias of a process's controlling terminal (major 5, minor 0). */
const DEV_TTY_RDEV = 5 << 8;

export interface LinuxInspectorOptions {
  readonly proc?: ProcSource;
  readonly arch?: string;
}

export class LinuxInspector implements ProcessInspector {
  readonly platform = 'linux' as const;
  readonly exactInputWait: boolean;
  readonly #proc: ProcSource;
  readonly #syscalls: ReadonlyMap<number, WaitShape> | undefined;

  constructor(options: LinuxInspectorOptions = {}) {
    this.#proc = options.proc ?? hostProc;
    this.#syscalls = WAIT_SYSCALLS[options.arch ?? process.arch];
    this.exactInputWait = this.#syscalls !== undefined;
  }

  stat(pid: number): ProcStat | undefined {
    const text = this.#proc.stat(pid);
    return text === undefined ? undefined : parseStat(text);
  }

  /** Every readable process entry. */
  table(): ProcStat[] {
    const rows: ProcStat[] = [];
    for (const pid of this.#proc.pids()) {
      const stat = this.stat(pid);
      if (stat !== undefined) rows.push(stat);
    }
    return rows;
  }

  foregroundGroup(shellPid: number): number | undefined {
    const stat = this.stat(shellPid);
    return stat !== undefined && stat.tpgid > 0 && !isEndedState(stat.state) ? stat.tpgid : undefined;
  }

  terminalDevice(path: string): TerminalDevice {
    const rdev = this.#proc.deviceOf(path);
    return rdev === undefined ? { path } : { path, rdev };
  }

  inputWait(pgid: number, terminal: TerminalDevice | undefined, rows?: readonly ProcessRow[]): InputWait | undefined {
    const table = this.#syscalls;
    if (table === undefined) return undefined;
    const terminalRdev = terminal === undefined ? undefined : (terminal.rdev ?? this.#proc.deviceOf(terminal.path));
    const tokens: string[] = [];
    const readers: number[] = [];
    for (const member of rows ?? this.snapshot()) {
      if (member.pgrp !== pgid || !member.alive) continue;
      const reads = (fd: number): boolean => this.#readsTerminal(member, fd, terminalRdev);
      const pid = member.identity.pid;
      for (const tid of this.#proc.tasks(pid)) {
        const text = this.#proc.syscall(pid, tid);
        const call = text === undefined ? undefined : parseSyscall(text);
        const shape = call === undefined ? undefined : table.get(call.nr);
        if (call === undefined || shape === undefined || !this.#waitsOn(pid, shape, call, reads)) continue;
        // Re-read after the proof: a thread that woke meanwhile is no proof.
        if (this.#proc.syscall(pid, tid) !== text) continue;
        tokens.push(`${pid}/${tid}/${member.identity.started}/${call.nr}/${this.#proc.switches(pid, tid) ?? '?'}`);
        if (!readers.includes(pid)) readers.push(pid);
      }
    }
    return tokens.length === 0 ? undefined : { token: tokens.join(','), readers, command: this.stat(readers[0]!)?.name };
  }

  /**
   * Whether `fd` of `member` is its terminal. Without a known terminal device the
   * rule is the classic one: fd 0. With one, any descriptor that refers to that
   * terminal counts, also through `/dev/tty`, and fd 0 redirected elsewhere does not.
   */
  #readsTerminal(member: ProcessRow, fd: number, terminalRdev: number | undefined): boolean {
    if (terminalRdev === undefined) return fd === 0;
    const target = this.#proc.fdTarget(member.identity.pid, fd);
    if (target === undefined) return false;
    if (target.rdev === terminalRdev && target.path.startsWith('/dev/')) return true;
    return target.rdev === DEV_TTY_RDEV && target.path === '/dev/tty' && member.terminal === terminalRdev;
  }

  #waitsOn(pid: number, shape: WaitShape, call: BlockedSyscall, reads: (fd: number) => boolean): boolean {
    const [a0, a1, a2] = call.args;
    switch (shape) {
      case 'read': {
        const fd = intArg(a0, 0);
        return fd !== undefined && reads(fd);
      }
      case 'select': {
        // select(nfds, readfds, ...): a bit per fd, fd 0 is bit 0 of byte 0.
        const requested = intArg(a0, 1);
        if (requested === undefined || a1 === 0n) return false;
        const nfds = Math.min(requested, MAX_WAIT_FDS);
        const set = this.#proc.memory(pid, a1, Math.ceil(nfds / 64) * 8);
        if (set === undefined) return false;
        for (let fd = 0; fd < nfds; fd += 1) {
          if (((set[fd >> 3] ?? 0) & (1 << (fd & 7))) !== 0 && reads(fd)) return true;
        }
        return false;
      }
      case 'poll': {
        // poll(fds, nfds, ...): struct pollfd { int fd; short events; short revents; }.
        const requested = intArg(a1, 1);
        if (a0 === 0n || requested === undefined) return false;
        const count = Math.min(requested, MAX_WAIT_FDS);
        const entries = this.#proc.memory(pid, a0, count * 8);
        if (entries === undefined) return false;
        for (let index = 0; index < count; index += 1) {
          const fd = entries.readInt32LE(index * 8);
          const events = entries.readInt16LE(index * 8 + 4);
          if (fd >= 0 && (events & POLLIN) !== 0 && reads(fd)) return true;
        }
        return false;
      }
      case 'epoll': {
        // epoll_wait(epfd, events, maxevents, ...): the watched fds are in fdinfo.
        const epfd = intArg(a0, 0);
        if (epfd === undefined || intArg(a2, 1) === undefined) return false;
        const info = this.#proc.fdinfo(pid, epfd);
        if (info === undefined) return false;
        for (const line of info.split('\n')) {
          const match = /^tfd:\s+(\d+)\b/.exec(line.trim());
          if (match !== null && reads(Number(match[1]))) return true;
        }
        return false;
      }
    }
  }

  nowTicks(): number | undefined {
    const seconds = Number(this.#proc.uptime()?.split(/\s+/)[0]);
    // Rounded up, so a process started in the current tick counts as started before now.
    return Number.isFinite(seconds) ? Math.ceil(seconds * CLOCK_TICKS_PER_SECOND) + 1 : undefined;
  }

  identity(pid: number): ProcessIdentity | undefined {
    const stat = this.stat(pid);
    return stat === undefined || isEndedState(stat.state) ? undefined : { pid, started: stat.starttime };
  }

  snapshot(): ProcessRow[] {
    return this.table().map(rowOf);
  }

  snapshotOf(pids: readonly number[]): ProcessRow[] {
    const rows: ProcessRow[] = [];
    for (const pid of pids) {
      const stat = this.stat(pid);
      if (stat !== undefined) rows.push(rowOf(stat));
    }
    return rows;
  }

  isAlive(identity: ProcessIdentity): boolean {
    const stat = this.stat(identity.pid);
    return stat !== undefined && stat.starttime === identity.started && !isEndedState(stat.state);
  }

  groupHasLiveMembers(pgid: number): boolean | undefined {
    let members = 0;
    for (const stat of this.table()) {
      if (stat.pgrp !== pgid) continue;
      if (!isEndedState(stat.state)) return true;
      members += 1;
    }
    return members > 0 ? false : undefined;
  }

  signalGroup(pgid: number, signal: NodeJS.Signals): void {
    process.kill(-pgid, signal);
  }

  signalProcess(identity: ProcessIdentity, signal: NodeJS.Signals): boolean {
    if (!this.isAlive(identity)) return false;
    try {
      process.kill(identity.pid, signal);
      return true;
    } catch (_error) {
      return false;
    }
  }
}

function rowOf(stat: ProcStat): ProcessRow {
  return {
    identity: { pid: stat.pid, started: stat.starttime },
    name: stat.name,
    ppid: stat.ppid,
    pgrp: stat.pgrp,
    session: stat.session,
    alive: !isEndedState(stat.state),
    startTicks: Number(stat.starttime),
    terminal: stat.ttyNr === 0 ? undefined : stat.ttyNr,
  };
}
