/**
 * This process's own operating system, read once: the only place the SDK
 * reads `process.platform`, for the file work it does locally (the archive
 * both ends share, made and unpacked where the SDK runs, the daemon
 * included). The platform of a world is never this: a runtime reports its
 * own (`runtime.platform`, the daemon's in `/v1/health`), and the code that
 * acts on it names it so (`worldPlatform`).
 * @module
 */

const platform = process.platform;

/** What this process's host offers the SDK's local file work. */
export const localHost = {
  /** `/proc/self/fd/<fd>` reaches an open descriptor again (Linux). */
  procfs: platform === 'linux',
  /** Paths are written with `\` between names (Windows). */
  backslashPaths: platform === 'win32',
} as const;
