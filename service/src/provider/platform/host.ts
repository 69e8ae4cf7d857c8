/**
 * This host's operating system, read once: the only place the provider
 * reads `process.platform`. The platform strategy (`index.ts`) is chosen from
 * it; the modules beneath the strategies (the C library calls, the file
 * anchors, the native loaders, cgroups, kernel32), which the strategies
 * import and so cannot ask, take what they need of it as the facts below.
 * @module
 */

/** The operating system this process runs on. */
export const HOST_PLATFORM: NodeJS.Platform = process.platform;

const linux = HOST_PLATFORM === 'linux';
const darwin = HOST_PLATFORM === 'darwin';
const windows = HOST_PLATFORM === 'win32';

/** What this host offers, by feature. */
export const hostFacts = {
  /** `/proc`: each process's files, and `/proc/self/fd/<fd>` reaching an open descriptor again (Linux). */
  procfs: linux,
  /** Linux's own calls: prctl (non-dumpable, child subreaper), renameat2, cgroup v2. */
  linuxCalls: linux,
  /** The C library the provider's few libc calls are bound from (Linux and macOS); undefined where it makes none. */
  libc: linux ? 'libc.so.6' : darwin ? 'libSystem.B.dylib' : undefined,
  /** The directory that lists this process's descriptors. */
  descriptorDirectory: darwin ? '/dev/fd' : '/proc/self/fd',
  /** node-pty's prebuilt binaries for this host, by their directory's name. */
  ptyPrebuilds: `${HOST_PLATFORM}-${process.arch}`,
  /** node-pty 1.1.0 ships macOS's spawn-helper without its exec bit. */
  ptyHelperLacksExecBit: darwin,
  /** kernel32, through koffi (Windows). */
  kernel32: windows,
} as const;
