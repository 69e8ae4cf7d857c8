/**
 * The few C library calls the provider needs that Node does not offer, made
 * through koffi and loaded on first use (Linux and macOS only).
 *
 * - `fcntl(F_SETFD, FD_CLOEXEC)`: node-pty's master descriptor is created
 *   without close-on-exec, so every later child (a shell of another owner, a
 *   managed process) would inherit it and could type into that terminal.
 * - `prctl(PR_SET_DUMPABLE, 0)`: a non-dumpable process's `/proc/<pid>` files
 *   belong to root, so a child of the same uid cannot read the daemon's
 *   environment or memory.
 * - `prctl(PR_SET_CHILD_SUBREAPER, 1)` and `waitpid(pid, WNOHANG)`: where no
 *   cgroup can be made, orphaned descendants of sessions are reparented to
 *   this process instead of init, and their zombies are reaped here, since
 *   Node only waits for the children it spawned itself.
 * - `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)` (Linux 5.11, glibc 2.34): every
 *   descriptor from 3 up marked close-on-exec in one call, whatever their
 *   number, where the sweep of `/proc/self/fd` costs a call per descriptor.
 * - `renameat2(RENAME_NOREPLACE)` (Linux): a rename that never replaces what
 *   is at its destination, decided by the kernel in one step.
 * - `execve` (Linux), for a takeover: the daemon becomes its new build in
 *   place, keeping its pid, so its sessions' programs stay its children; Node
 *   20 has no `process.execve`. `waitpid` with a status collects the exits of
 *   those children afterwards, which neither libuv nor node-pty know of.
 * - `ioctl(FIONREAD)` and `ioctl(TIOCGPGRP)` on a terminal's master (Linux):
 *   what it holds for a read, and its foreground group, each in one call.
 * - `lgetxattr("system.posix_acl_access")` (Linux): whether a secret file
 *   grants more through an access control list than its mode bits show.
 * @module
 */
import { readdirSync } from 'node:fs';
import { constants } from 'node:os';
import { createRequire } from 'node:module';
import type Koffi from 'koffi';
import { HOST_PLATFORM, hostFacts } from '../platform/host.ts';

interface Libc {
  fcntl(fd: number, command: number, ...rest: unknown[]): number;
  prctl?: (option: number, a2: number, a3: number, a4: number, a5: number) => number;
  waitpid(pid: number, status: null | [number], options: number): number;
  execve?: (file: string, argv: (string | null)[], env: (string | null)[]) => number;
  renameat2?: (oldDir: number, oldPath: string, newDir: number, newPath: string, flags: number) => number;
  /** lgetxattr with no buffer: the size of the attribute, or -1 (ENODATA: none). */
  lgetxattr?: (path: string, name: string, value: null, size: number) => number;
  closeRange?: (first: number, last: number, flags: number) => number;
  tcsetattr?: (fd: number, actions: number, termios: Buffer) => number;
  tcgetattr?: (fd: number, termios: Buffer) => number;
  /** ioctl with an int the kernel fills in (FIONREAD's count, TIOCGPGRP's group). */
  ioctlInt?: (fd: number, request: number, value: [number]) => number;
  spawn?: Spawn;
  exits?: ExitWatch;
  errno(): number;
}

/** fcntl commands and flags; the same values on Linux and macOS. */
const F_GETFD = 1;
const F_SETFD = 2;
const F_GETFL = 3;
const F_SETFL = 4;
/** O_NONBLOCK where Linux's flags are the generic ones (spawnProgram is bound only there). */
const O_NONBLOCK = 0o4000;
/** Linux's (and glibc's) F_DUPFD_CLOEXEC. */
const F_DUPFD_CLOEXEC = 1030;
const FD_CLOEXEC = 1;
/** prctl options (Linux). */
const PR_SET_DUMPABLE = 4;
const PR_GET_DUMPABLE = 3;
const PR_SET_CHILD_SUBREAPER = 36;
/** close_range flag (Linux 5.11): mark the range close-on-exec instead of closing it. */
const CLOSE_RANGE_CLOEXEC = 4;
/** The highest descriptor number, as close_range takes it (`~0U`). */
const MAX_FD = 0xffff_ffff;
/** waitpid option: return at once when the child has not exited. Linux and macOS. */
const WNOHANG = 1;

/** Linux's FIONREAD (TIOCINQ on a terminal): the bytes a read would find now. */
const FIONREAD = 0x541b;
/** Linux's TIOCGPGRP: the foreground process group of a terminal (of the slave, asked on a pty's master). */
const TIOCGPGRP = 0x540f;
/** The architectures whose Linux ioctl numbers are the generic ones, FIONREAD and TIOCGPGRP among them (mips, powerpc, sparc and alpha differ). */
const GENERIC_IOCTL_ARCHES: ReadonlySet<string> = new Set(['x64', 'ia32', 'arm', 'arm64', 'riscv64', 's390x', 'loong64']);

/** glibc's posix_spawn and the calls that set up its file actions and attributes (Linux). */
interface Spawn {
  posixSpawn(pid: [number], path: string, actions: Buffer, attributes: Buffer, argv: (string | null)[], envp: (string | null)[]): number;
  actionsInit(actions: Buffer): number;
  actionsDestroy(actions: Buffer): number;
  addDup2(actions: Buffer, fd: number, to: number): number;
  addChdir(actions: Buffer, path: string): number;
  attributesInit(attributes: Buffer): number;
  attributesDestroy(attributes: Buffer): number;
  setFlags(attributes: Buffer, flags: number): number;
  setSigmask(attributes: Buffer, set: Buffer): number;
  setSigdefault(attributes: Buffer, set: Buffer): number;
  sigemptyset(set: Buffer): number;
  sigfillset(set: Buffer): number;
  /** socketpair(2), the pair written to `pair` as two ints. */
  socketPair(domain: number, type: number, protocol: number, pair: Buffer): number;
}

/** pidfd_open (Linux 5.3) through syscall(2), and an epoll set of pidfds (Linux). */
interface ExitWatch {
  pidfdOpen(pid: number): number;
  epollCreate(flags: number): number;
  epollCtl(epfd: number, op: number, fd: number, event: Buffer): number;
  epollWait(epfd: number, events: Buffer, max: number, timeoutMs: number): number;
  close(fd: number): number;
}

/** pidfd_open's number: the same on every architecture whose ioctl numbers are generic (alpha differs). */
const SYS_PIDFD_OPEN = 434;
const EPOLL_CLOEXEC = 0o2000000;
const EPOLL_CTL_ADD = 1;
const EPOLLIN = 1;
/** struct epoll_event: packed on x86-64 (12 bytes, the data at 4), naturally aligned elsewhere (16, at 8). */
const EPOLL_EVENT_BYTES = process.arch === 'x64' ? 12 : 16;
const EPOLL_DATA_AT = process.arch === 'x64' ? 4 : 8;

/** Room for glibc's posix_spawn_file_actions_t (80 bytes on 64-bit), posix_spawnattr_t (336) and sigset_t (128). */
const SPAWN_STRUCT_BYTES = 1024;
/** posix_spawnattr flags (glibc). */
const POSIX_SPAWN_SETSIGDEF = 0x04;
const POSIX_SPAWN_SETSIGMASK = 0x08;
/** glibc 2.26: the child calls setsid before it execs. */
const POSIX_SPAWN_SETSID = 0x80;
/** The errnos of a refused clone (Linux). */
const EPERM = 1;
const ENOSYS = 38;
/** socketpair's domain and type (Linux). */
const AF_UNIX = 1;
const SOCK_STREAM = 1;
const SOCK_CLOEXEC = 0o2000000;

let loaded: Libc | undefined;

function libc(): Libc {
  if (loaded !== undefined) return loaded;
  const file = hostFacts.libc;
  if (file === undefined) throw new Error(`libc calls are not used on ${HOST_PLATFORM}`);
  // koffi is loaded lazily: a daemon that never opens a terminal never maps it.
  const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
  const library = koffi.load(file);
  const fcntl = library.func('int fcntl(int fd, int cmd, ...)') as (fd: number, command: number, ...rest: unknown[]) => number;
  const prctl = hostFacts.linuxCalls
    ? (library.func('int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5)') as Libc['prctl'])
    : undefined;
  const waitpid = library.func('int waitpid(int pid, _Out_ int *status, int options)') as Libc['waitpid'];
  const syscall = library.func('long syscall(long number, ...)');
  const renameat2 = hostFacts.linuxCalls
    ? (library.func('int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)') as Libc['renameat2'])
    : undefined;
  const lgetxattr = hostFacts.linuxCalls
    ? (library.func('long lgetxattr(const char *path, const char *name, void *value, size_t size)') as Libc['lgetxattr'])
    : undefined;
  const closeRange = hostFacts.linuxCalls
    ? (optionalFunction(library, 'int close_range(unsigned int first, unsigned int last, int flags)') as Libc['closeRange'])
    : undefined;
  const execve = hostFacts.linuxCalls ? (library.func('int execve(const char *path, const char **argv, const char **envp)') as Libc['execve']) : undefined;
  const tcsetattr = hostFacts.linuxCalls ? (library.func('int tcsetattr(int fd, int optional_actions, void *termios_p)') as Libc['tcsetattr']) : undefined;
  // Only where ICANON is the generic 0o2 (powerpc and alpha number the flags differently).
  const tcgetattr =
    GENERIC_IOCTL_ARCHES.has(process.arch) && hostFacts.linuxCalls
      ? (library.func('int tcgetattr(int fd, _Out_ void *termios_p)') as Libc['tcgetattr'])
      : undefined;
  const ioctlInt =
    GENERIC_IOCTL_ARCHES.has(process.arch) && hostFacts.linuxCalls
      ? (library.func('int ioctl(int fd, unsigned long request, _Out_ int *value)') as Libc['ioctlInt'])
      : undefined;
  const spawn = GENERIC_IOCTL_ARCHES.has(process.arch) && hostFacts.linuxCalls ? spawnCalls(library) : undefined;
  const exits =
    GENERIC_IOCTL_ARCHES.has(process.arch) && hostFacts.linuxCalls
      ? {
          pidfdOpen: (pid: number) => (syscall as (...args: unknown[]) => number)(SYS_PIDFD_OPEN, 'int', pid, 'unsigned int', 0),
          epollCreate: library.func('int epoll_create1(int flags)') as ExitWatch['epollCreate'],
          epollCtl: library.func('int epoll_ctl(int epfd, int op, int fd, void *event)') as ExitWatch['epollCtl'],
          epollWait: library.func('int epoll_wait(int epfd, _Out_ void *events, int max, int timeout)') as ExitWatch['epollWait'],
          close: library.func('int close(int fd)') as ExitWatch['close'],
        }
      : undefined;
  loaded = {
    fcntl,
    ...(ioctlInt === undefined ? {} : { ioctlInt }),
    ...(spawn === undefined ? {} : { spawn }),
    ...(exits === undefined ? {} : { exits }),
    waitpid,
    errno: () => koffi.errno(),
    ...(prctl === undefined ? {} : { prctl }),
    ...(renameat2 === undefined ? {} : { renameat2 }),
    ...(lgetxattr === undefined ? {} : { lgetxattr }),
    ...(closeRange === undefined ? {} : { closeRange }),
    ...(tcsetattr === undefined ? {} : { tcsetattr }),
    ...(tcgetattr === undefined ? {} : { tcgetattr }),
    ...(execve === undefined ? {} : { execve }),
  };
  return loaded;
}

/** posix_spawn and its set-up calls, where this C library has them all (glibc 2.29 added the chdir action); undefined where not. */
function spawnCalls(library: ReturnType<typeof Koffi.load>): Spawn | undefined {
  const calls = {
    posixSpawn: optionalFunction(
      library,
      'int posix_spawn(_Out_ int *pid, const char *path, void *actions, void *attributes, const char **argv, const char **envp)',
    ),
    actionsInit: optionalFunction(library, 'int posix_spawn_file_actions_init(void *actions)'),
    actionsDestroy: optionalFunction(library, 'int posix_spawn_file_actions_destroy(void *actions)'),
    addDup2: optionalFunction(library, 'int posix_spawn_file_actions_adddup2(void *actions, int fd, int to)'),
    addChdir: optionalFunction(library, 'int posix_spawn_file_actions_addchdir_np(void *actions, const char *path)'),
    attributesInit: optionalFunction(library, 'int posix_spawnattr_init(void *attributes)'),
    attributesDestroy: optionalFunction(library, 'int posix_spawnattr_destroy(void *attributes)'),
    setFlags: optionalFunction(library, 'int posix_spawnattr_setflags(void *attributes, short flags)'),
    setSigmask: optionalFunction(library, 'int posix_spawnattr_setsigmask(void *attributes, void *set)'),
    setSigdefault: optionalFunction(library, 'int posix_spawnattr_setsigdefault(void *attributes, void *set)'),
    sigemptyset: optionalFunction(library, 'int sigemptyset(void *set)'),
    sigfillset: optionalFunction(library, 'int sigfillset(void *set)'),
    socketPair: optionalFunction(library, 'int socketpair(int domain, int type, int protocol, void *pair)'),
  };
  return Object.values(calls).every((call) => call !== undefined) ? (calls as unknown as Spawn) : undefined;
}

/** The function of `signature` where this C library has it (glibc before 2.34 lacks close_range); undefined where not. */
function optionalFunction(library: ReturnType<typeof Koffi.load>, signature: string): ((...args: never[]) => unknown) | undefined {
  try {
    return library.func(signature) as (...args: never[]) => unknown;
  } catch (_error) {
    return undefined;
  }
}

/**
 * How many bytes a read of `fd` would find now, asked without reading
 * (FIONREAD). A read of a terminal's master that finds nothing first waits in
 * the kernel for the line discipline's pending work, which a program writing
 * in bulk keeps queuing: the count does not wait. Undefined where it cannot
 * be asked (not Linux, another architecture's numbers, a bad descriptor).
 */
export function bytesReadable(fd: number): number | undefined {
  return ioctlInt(fd, FIONREAD);
}

/**
 * The foreground process group of the terminal whose master is `fd`, asked
 * of the kernel in one call (TIOCGPGRP), where reading it from the session
 * leader's `/proc/<pid>/stat` costs an open, a read and a close: 0 when the
 * terminal has none (its session has not taken it yet, or its leader exited
 * or gave it up, which clears it). Undefined where it cannot be asked (not
 * Linux, another architecture's numbers, a bad descriptor).
 */
export function terminalForegroundGroup(fd: number): number | undefined {
  return ioctlInt(fd, TIOCGPGRP);
}

function ioctlInt(fd: number, request: number): number | undefined {
  const c = libc();
  if (c.ioctlInt === undefined) return undefined;
  const value: [number] = [0];
  return c.ioctlInt(fd, request, value) < 0 ? undefined : value[0];
}

/**
 * Marks `fd` close-on-exec.
 * @throws when the flag cannot be set (a bad descriptor, or no libc binding).
 */
export function setCloseOnExec(fd: number): void {
  const c = libc();
  const flags = c.fcntl(fd, F_GETFD);
  if (flags < 0) throw new Error(`fcntl(${fd}, F_GETFD) failed with errno ${c.errno()}`);
  if ((flags & FD_CLOEXEC) !== 0) return;
  if (c.fcntl(fd, F_SETFD, 'int', flags | FD_CLOEXEC) < 0) throw new Error(`fcntl(${fd}, F_SETFD) failed with errno ${c.errno()}`);
}

/**
 * Linux's `struct termios` as glibc lays it out (60 bytes: four flag words,
 * the line discipline, 32 control characters, then the two speeds), with the
 * modes node-pty's fork gives a new terminal: a UTF-8 line-editing terminal
 * with echo, signals from ^C ^\\ ^Z, ^D as end of file, DEL as erase, 38400 baud.
 */
function defaultTermios(): Buffer {
  const termios = Buffer.alloc(60);
  const [B38400, VEOL, VEOL2] = [0o17, 11, 16];
  termios.writeUInt32LE(0o400 | 0o2000 | 0o4000 | 0o20000 | 0o2 | 0o40000, 0); // ICRNL IXON IXANY IMAXBEL BRKINT IUTF8
  termios.writeUInt32LE(0o1 | 0o4, 4); // OPOST ONLCR
  termios.writeUInt32LE(0o200 | 0o60 | 0o2000 | B38400, 8); // CREAD CS8 HUPCL
  termios.writeUInt32LE(0o2 | 0o1 | 0o100000 | 0o10 | 0o20 | 0o40 | 0o4000 | 0o1000, 12); // ICANON ISIG IEXTEN ECHO ECHOE ECHOK ECHOKE ECHOCTL
  const cc = 17;
  // VINTR VQUIT VERASE VKILL VEOF VTIME VMIN, then VSTART VSTOP VSUSP, VREPRINT VDISCARD VWERASE VLNEXT.
  for (const [index, value] of [
    [0, 3],
    [1, 0x1c],
    [2, 0x7f],
    [3, 21],
    [4, 4],
    [5, 0],
    [6, 1],
    [8, 17],
    [9, 19],
    [10, 26],
    [12, 18],
    [13, 15],
    [14, 23],
    [15, 22],
    [VEOL, 0xff],
    [VEOL2, 0xff],
  ] as const)
    termios[cc + index] = value;
  termios.writeUInt32LE(B38400, 52);
  termios.writeUInt32LE(B38400, 56);
  return termios;
}

/** ICANON in `c_lflag`, the third flag word of `struct termios`. */
const ICANON = 0o2;
const LFLAG_OFFSET = 12;

/**
 * Whether the terminal `fd` reads its input by lines (canonical mode), asked
 * on a pty's master as on its slave: a reader of it is woken by a line's end
 * (or an end of file), where in raw mode any byte wakes it. Undefined where
 * it cannot be asked (not Linux, a bad descriptor).
 */
export function terminalReadsLines(fd: number): boolean | undefined {
  const c = libc();
  if (c.tcgetattr === undefined) return undefined;
  const termios = Buffer.alloc(60);
  if (c.tcgetattr(fd, termios) !== 0) return undefined;
  return (termios.readUInt32LE(LFLAG_OFFSET) & ICANON) !== 0;
}

/** Gives the terminal `fd` (either side) the modes of a new terminal (see {@link defaultTermios}). Linux only. */
export function setDefaultTerminalModes(fd: number): void {
  const c = libc();
  if (c.tcsetattr === undefined) throw new Error('tcsetattr is bound on Linux only');
  if (c.tcsetattr(fd, 0, defaultTermios()) !== 0) throw new Error(`tcsetattr(${fd}) failed with errno ${c.errno()}`);
}

export function isCloseOnExec(fd: number): boolean | undefined {
  const flags = libc().fcntl(fd, F_GETFD);
  return flags < 0 ? undefined : (flags & FD_CLOEXEC) !== 0;
}

/** Whether close_range has worked here; false once it failed (a kernel before 5.11 says ENOSYS or EINVAL). */
let closeRangeWorks = true;

/**
 * Marks every descriptor of this process from 3 up close-on-exec, so children
 * start with exactly 0-2: descriptors the daemon inherited from whatever
 * started it included. One `close_range` where the kernel has it, so a spawn
 * costs the same whatever the number of sessions the daemon holds; otherwise
 * a sweep of the descriptor table.
 */
export function closeInheritedDescriptorsOnExec(): void {
  const c = libc();
  if (closeRangeWorks && c.closeRange !== undefined) {
    if (c.closeRange(3, MAX_FD, CLOSE_RANGE_CLOEXEC) === 0) return;
    closeRangeWorks = false;
  }
  markEachDescriptorOnExec();
}

/** The sweep, where close_range is missing: each descriptor from 3 up listed and marked. */
function markEachDescriptorOnExec(): void {
  for (const name of readdirSync(hostFacts.descriptorDirectory)) {
    const fd = Number(name);
    if (!Number.isSafeInteger(fd) || fd < 3) continue;
    // The directory listing's own descriptor is gone by now: an unknown fd is skipped.
    if (isCloseOnExec(fd) !== false) continue;
    setCloseOnExec(fd);
  }
}

/** Linux's ENODATA: no such extended attribute. */
const ENODATA = 61;
/** Linux's EOPNOTSUPP (ENOTSUP): the filesystem keeps no extended attributes. */
const EOPNOTSUPP = 95;

/**
 * Whether `path` (a link itself, not followed) carries a POSIX access control
 * list beyond its mode bits (Linux keeps a list that says no more than the
 * mode as the mode alone, so an attribute there means named users or groups,
 * whom the mode does not show). Undefined where it cannot be asked (not
 * Linux, or the kernel answered something else).
 */
export function hasAccessAcl(path: string): boolean | undefined {
  if (!hostFacts.linuxCalls) return undefined;
  const lgetxattr = libc().lgetxattr;
  if (lgetxattr === undefined) return undefined;
  if (lgetxattr(path, 'system.posix_acl_access', null, 0) >= 0) return true;
  const errno = libc().errno();
  return errno === ENODATA || errno === EOPNOTSUPP ? false : undefined;
}

/**
 * Makes this process non-dumpable (Linux): its `/proc` entries become
 * root-owned, so processes of the same uid cannot read its environment or
 * memory. Returns false where that is not possible.
 */
export function makeNonDumpable(): boolean {
  if (!hostFacts.linuxCalls) return false;
  const prctl = libc().prctl;
  if (prctl === undefined) return false;
  return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) === 0 && prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) === 0;
}

/**
 * Makes this process a child subreaper (Linux): a descendant whose parent dies
 * is reparented to this process instead of init, so it stays findable and its
 * exit is this process's to collect. Returns false where that is not possible.
 */
export function becomeChildSubreaper(): boolean {
  if (!hostFacts.linuxCalls) return false;
  const prctl = libc().prctl;
  return prctl !== undefined && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) === 0;
}

/**
 * Collects the exit of child `pid` if it has exited, without blocking. True
 * when it was reaped. Only for children nothing else waits for: Node and
 * node-pty lose the exit status of a child reaped behind their backs.
 */
export function reapIfExited(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  return libc().waitpid(pid, null, WNOHANG) === pid;
}

/** renameat2's "paths are relative to the working directory", and its flag that refuses to replace. */
const AT_FDCWD = -100;
const RENAME_NOREPLACE = 1;

/**
 * Renames `from` to `to` unless something is at `to` (Linux, in one step).
 * Answers 'exists' when something is there, 'unsupported' where the call or
 * the filesystem cannot do it (the caller then decides another way), and
 * throws the operating system's error (with its errno name as `code`) for
 * any other failure.
 */
export function renameNoReplace(from: string, to: string): 'renamed' | 'exists' | 'unsupported' {
  if (!hostFacts.linuxCalls) return 'unsupported';
  const c = libc();
  if (c.renameat2 === undefined) return 'unsupported';
  if (c.renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) === 0) return 'renamed';
  const errno = c.errno();
  if (errno === constants.errno.EEXIST) return 'exists';
  if (errno === constants.errno.EINVAL || errno === constants.errno.ENOSYS) return 'unsupported';
  const name = errnoName(errno);
  throw Object.assign(new Error(`${name}: rename ${from} -> ${to}`), { code: name, errno: -errno, syscall: 'rename' });
}

/**
 * Clears `fd`'s close-on-exec flag, so that it survives an {@link execve}.
 * @throws when the flag cannot be cleared (a bad descriptor, or no libc binding).
 */
export function keepAcrossExec(fd: number): void {
  const c = libc();
  const flags = c.fcntl(fd, F_GETFD);
  if (flags < 0) throw new Error(`fcntl(${fd}, F_GETFD) failed with errno ${c.errno()}`);
  if ((flags & FD_CLOEXEC) === 0) return;
  if (c.fcntl(fd, F_SETFD, 'int', flags & ~FD_CLOEXEC) < 0) throw new Error(`fcntl(${fd}, F_SETFD) failed with errno ${c.errno()}`);
}

/**
 * A second descriptor of what `fd` refers to, close-on-exec, numbered 3 or up.
 * @throws when it cannot be made (a bad descriptor, no descriptor left, or no libc binding).
 */
export function duplicateDescriptor(fd: number): number {
  const c = libc();
  const copy = c.fcntl(fd, F_DUPFD_CLOEXEC, 'int', 3);
  if (copy < 0) throw new Error(`fcntl(${fd}, F_DUPFD_CLOEXEC) failed with errno ${c.errno()}`);
  return copy;
}

/** The name of `errno` (ENOEXEC for 8), as this platform's constants have it; libuv's own names lack some (ENOEXEC). */
function errnoName(errno: number): string {
  return Object.entries(constants.errno).find(([, value]) => value === errno)?.[0] ?? `errno ${errno}`;
}

/** The error of call `what` that failed with `errno`, as Node names a system call's (`code`, a negative `errno`, `syscall`). */
function callFailed(what: string, errno: number): NodeJS.ErrnoException {
  const name = errnoName(errno);
  return Object.assign(new Error(`${what} failed: ${name}`), { code: name, errno: -errno, syscall: what });
}

/** This host refused posix_spawn's clone once: see {@link spawnProgram}. */
let spawnRefused = false;

/**
 * Whether {@link spawnProgram} can start programs here: Linux, with glibc's
 * posix_spawn and its chdir action, and the host never refused its clone.
 */
export function canSpawnPrograms(): boolean {
  if (spawnRefused) return false;
  try {
    return libc().spawn !== undefined;
  } catch (_error) {
    return false;
  }
}

/**
 * A connected pair of Unix stream sockets, both close-on-exec, as libuv makes
 * a child's stdio pipe: [this process's end, the child's end].
 * @throws when the kernel refuses (EMFILE).
 */
export function socketPair(): [number, number] {
  const spawn = libc().spawn;
  if (spawn === undefined) throw new Error('socketpair is bound where posix_spawn is only');
  const pair = Buffer.alloc(8);
  if (spawn.socketPair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) !== 0) throw callFailed('socketpair', libc().errno());
  return [pair.readInt32LE(0), pair.readInt32LE(4)];
}

/**
 * Starts `file` with `argv` and `env` in `cwd`, with posix_spawn: glibc's
 * clone shares this process's memory until the child execs (CLONE_VM |
 * CLONE_VFORK), where a fork copies its page tables (Node's spawn: 3.5 ms for
 * a 45 MB process, 9 to 11 ms at 245 MB, against 0.5 ms). `stdio[n]` is the
 * descriptor the child gets as its descriptor n, made blocking first (a pty's
 * slave is opened non-blocking, and a shell's read would fail at once); an
 * absent one is left as this process has it (inherited). With `newSession`
 * the child calls setsid before its exec. Like Node's spawn, the child starts
 * with every signal at its default action and none blocked (this process
 * ignores SIGPIPE, which an exec keeps), and inherits no descriptor but its
 * stdio: every other one of this process is close-on-exec. It is born in the
 * cgroups of the calling thread. Nothing in this process waits for it: its
 * exit is the caller's to collect ({@link collectExit}). Returns its pid.
 *
 * A host that refuses the clone (a seccomp profile that answers clone3 with
 * EPERM, not ENOSYS) is told so once: {@link canSpawnPrograms} is false from
 * then on, and the caller starts this program and every later one otherwise.
 * @throws {NodeJS.ErrnoException} when it cannot be started (the exec failed: its errno, ENOENT for a missing `file`)
 */
export function spawnProgram(
  file: string,
  argv: readonly string[],
  env: Readonly<Record<string, string>>,
  cwd: string,
  stdio: readonly (number | undefined)[],
  options: { readonly newSession?: boolean } = {},
): number {
  const c = libc();
  const spawn = c.spawn;
  if (spawn === undefined) throw new Error('posix_spawn is bound on Linux with glibc 2.29 or later only');
  for (const fd of new Set(stdio)) {
    if (fd === undefined) continue;
    const flags = c.fcntl(fd, F_GETFL);
    if (flags < 0 || ((flags & O_NONBLOCK) !== 0 && c.fcntl(fd, F_SETFL, 'int', flags & ~O_NONBLOCK) < 0)) {
      throw new Error(`fcntl(${fd}, F_SETFL) failed with errno ${c.errno()}`);
    }
  }
  const actions = Buffer.alloc(SPAWN_STRUCT_BYTES);
  const attributes = Buffer.alloc(SPAWN_STRUCT_BYTES);
  const empty = Buffer.alloc(SPAWN_STRUCT_BYTES);
  const full = Buffer.alloc(SPAWN_STRUCT_BYTES);
  const check = (what: string, code: number): void => {
    if (code !== 0) throw callFailed(what, code);
  };
  check('posix_spawn_file_actions_init', spawn.actionsInit(actions));
  try {
    check('posix_spawnattr_init', spawn.attributesInit(attributes));
    try {
      for (const [to, fd] of stdio.entries()) if (fd !== undefined) check('posix_spawn_file_actions_adddup2', spawn.addDup2(actions, fd, to));
      check('posix_spawn_file_actions_addchdir_np', spawn.addChdir(actions, cwd));
      spawn.sigemptyset(empty);
      spawn.sigfillset(full);
      check('posix_spawnattr_setsigmask', spawn.setSigmask(attributes, empty));
      check('posix_spawnattr_setsigdefault', spawn.setSigdefault(attributes, full));
      const flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | (options.newSession === true ? POSIX_SPAWN_SETSID : 0);
      check('posix_spawnattr_setflags', spawn.setFlags(attributes, flags));
      const pid: [number] = [0];
      const environment = Object.entries(env).map(([name, value]) => `${name}=${value}`);
      const code = spawn.posixSpawn(pid, file, actions, attributes, [...argv, null], [...environment, null]);
      // The clone refused (an exec's EPERM, a set-user-ID file on a nosuid mount, is taken so too: later starts are Node's, which answers the same).
      if (code === EPERM || code === ENOSYS) spawnRefused = true;
      check('posix_spawn', code);
      return pid[0];
    } finally {
      spawn.attributesDestroy(attributes);
    }
  } finally {
    spawn.actionsDestroy(actions);
  }
}

/**
 * A set of children whose exits are told without asking each of them: a
 * pidfd (Linux 5.3) of each in one epoll set, which says which exited, where
 * a waitpid of every child on every SIGCHLD costs as many calls as there are
 * children (libuv's way: 1.5 ms per exit with 1,000 children).
 */
export class ExitSet {
  readonly #epoll: number;
  readonly #pidfds = new Map<number, number>();
  readonly #events = Buffer.alloc(64 * EPOLL_EVENT_BYTES);

  /** A new set, or undefined where pidfds or epoll are not there (not Linux, a kernel before 5.3). */
  static open(): ExitSet | undefined {
    let exits: ExitWatch | undefined;
    try {
      exits = libc().exits;
    } catch (_error) {
      return undefined;
    }
    if (exits === undefined) return undefined;
    const epoll = exits.epollCreate(EPOLL_CLOEXEC);
    if (epoll < 0) return undefined;
    const probe = exits.pidfdOpen(process.pid);
    if (probe < 0) {
      exits.close(epoll);
      return undefined;
    }
    exits.close(probe);
    return new ExitSet(epoll);
  }

  private constructor(epoll: number) {
    this.#epoll = epoll;
  }

  /** Watches child `pid`; false when it cannot be (no such process: reaped already). */
  add(pid: number): boolean {
    const exits = libc().exits!;
    const pidfd = exits.pidfdOpen(pid);
    if (pidfd < 0) return false;
    const event = Buffer.alloc(EPOLL_EVENT_BYTES);
    event.writeUInt32LE(EPOLLIN, 0);
    event.writeBigUInt64LE(BigInt(pid), EPOLL_DATA_AT);
    if (exits.epollCtl(this.#epoll, EPOLL_CTL_ADD, pidfd, event) < 0) {
      exits.close(pidfd);
      return false;
    }
    this.#pidfds.set(pid, pidfd);
    return true;
  }

  /** The watched children that exited since they were last told, each told once; their pidfds are closed. */
  exited(): number[] {
    const exits = libc().exits!;
    const found: number[] = [];
    for (;;) {
      const count = exits.epollWait(this.#epoll, this.#events, 64, 0);
      if (count <= 0) return found;
      for (let index = 0; index < count; index += 1) {
        const pid = Number(this.#events.readBigUInt64LE(index * EPOLL_EVENT_BYTES + EPOLL_DATA_AT));
        const pidfd = this.#pidfds.get(pid);
        if (pidfd === undefined) continue;
        // Closing its only descriptor takes the pidfd out of the epoll set.
        exits.close(pidfd);
        this.#pidfds.delete(pid);
        found.push(pid);
      }
      if (count < 64) return found;
    }
  }
}

/** How a child ended, as waitpid reports it: its exit code, or the signal that killed it (0 for none). */
export interface ChildExit {
  readonly exitCode: number;
  readonly signal: number;
}

/**
 * Collects the exit of child `pid` without blocking: its exit facts once it
 * exited, undefined while it runs, 'gone' when it is no child of this process
 * (ECHILD: reaped already, or never ours). Only for children nothing else in
 * this process waits for (see {@link reapIfExited}).
 */
export function collectExit(pid: number): ChildExit | 'gone' | undefined {
  if (!Number.isSafeInteger(pid) || pid <= 0) return 'gone';
  const c = libc();
  const status: [number] = [0];
  const result = c.waitpid(pid, status, WNOHANG);
  if (result === 0) return undefined;
  if (result !== pid) return c.errno() === constants.errno.EINTR ? undefined : 'gone';
  // WIFEXITED: the low seven bits are 0, and the code is the next byte; else they are the signal.
  const raw = status[0];
  return (raw & 0x7f) === 0 ? { exitCode: (raw >> 8) & 0xff, signal: 0 } : { exitCode: 0, signal: raw & 0x7f };
}

/**
 * Replaces this process's image with `file` run with `argv` and `env`
 * (Linux): the pid, the children, the cgroup and every descriptor without
 * close-on-exec stay. Returns only when the exec failed, with its errno.
 * Call it from the main thread: every other thread ends with the exec.
 */
export function execve(file: string, argv: readonly string[], env: Readonly<Record<string, string | undefined>>): number {
  const c = libc();
  if (c.execve === undefined) throw new Error('execve is bound on Linux only');
  const environment = Object.entries(env).flatMap(([name, value]) => (value === undefined ? [] : [`${name}=${value}`]));
  c.execve(file, [...argv, null], [...environment, null]);
  return c.errno();
}
