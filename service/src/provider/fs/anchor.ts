/**
 * Holding a file or directory while it is used, and confining an owner to a
 * root. On Linux an anchor is an `O_PATH` descriptor: what it names cannot
 * change under it, its real path is read back from `/proc/self/fd`, and every
 * later step (stat, read, listing, staging a write, publishing it) goes
 * through `/proc/self/fd/<fd>`, so a link or `..` swapped in after the check
 * cannot lead an operation out of the root. Where there is no `/proc` the
 * anchor is the real path checked just before use.
 * @module
 */
import { constants } from 'node:fs';
import { realpathSync, type BigIntStats } from 'node:fs';
import { lstat, mkdir, open, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, isAbsolute, normalize, sep } from 'node:path';
import { FsFailure } from './fs-error.ts';

/** Linux's O_PATH (the same value on x86-64 and arm64); Node does not export it. */
const O_PATH = 0o10000000;
const PROC_FD = process.platform === 'linux';

/** A file system object held for the length of one operation. */
export interface Anchor {
  /** Its real path, read when it was taken. */
  readonly real: string;
  /** The path that reaches exactly this object: `/proc/self/fd/<fd>`, or `real` without /proc. */
  readonly via: string;
  /** A path to the entry `name` inside this directory. */
  child(name: string): string;
  /** The object's metadata, read through the anchor. */
  stat(): Promise<BigIntStats>;
  release(): Promise<void>;
}

/** Whether `real` is `root` or lies under it. */
export function isWithin(root: string, real: string): boolean {
  if (root === sep) return real.startsWith(sep);
  return real === root || real.startsWith(root + sep);
}

/**
 * The rule of one owner's view of the world: everything it reaches must
 * really lie under `root` (all of the world when there is none).
 */
export class PathGuard {
  /** The root's real path; undefined confines nothing. */
  readonly root: string | undefined;

  constructor(root: string | undefined) {
    if (root !== undefined && !isAbsolute(root)) throw new Error(`a filesystem root must be an absolute path, not ${root}`);
    this.root = root === undefined ? undefined : realpathSync(normalize(root));
  }

  /** Whether the real path `real` may be reached. */
  allows(real: string): boolean {
    return this.root === undefined || isWithin(this.root, real);
  }

  /** Throws FS_PERMISSION_DENIED unless `real` may be reached. */
  check(real: string, displayPath: string): void {
    if (!this.allows(real)) throw new FsFailure('FS_PERMISSION_DENIED', `"${displayPath}" is outside this owner's root`);
  }

  /**
   * Takes the object at `path` (following links), checked against the root.
   * Rejects with Node's own error (ENOENT, ENOTDIR, ...) when it cannot be
   * reached, and FS_PERMISSION_DENIED when it lies outside the root.
   */
  async take(path: string, displayPath: string, options: { directory?: boolean } = {}): Promise<Anchor> {
    if (!PROC_FD) {
      const real = await realpath(path);
      this.check(real, displayPath);
      return {
        real,
        via: real,
        child: (name) => `${real}${real.endsWith(sep) ? '' : sep}${name}`,
        stat: () => stat(real, { bigint: true }),
        release: async () => {},
      };
    }
    const handle = await open(path, O_PATH | (options.directory === true ? constants.O_DIRECTORY : 0));
    try {
      const via = `/proc/self/fd/${handle.fd}`;
      const real = await readlink(via);
      this.check(real, displayPath);
      return anchorOf(handle, via, real);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Takes the directory at `path`, made first (with its missing parents) when `create` says so and it is missing. */
  async takeDirectory(path: string, displayPath: string, create: boolean): Promise<Anchor> {
    try {
      return await this.take(path, displayPath, { directory: true });
    } catch (error) {
      const parent = dirname(path);
      if (!create || (error as { code?: unknown }).code !== 'ENOENT' || parent === path) throw error;
      const above = await this.takeDirectory(parent, displayPath, true);
      try {
        try {
          await mkdir(above.child(basename(path)));
        } catch (made) {
          if ((made as { code?: unknown }).code !== 'EEXIST') throw made;
        }
        return await this.take(above.child(basename(path)), displayPath, { directory: true });
      } finally {
        await above.release();
      }
    }
  }
}

function anchorOf(handle: FileHandle, via: string, real: string): Anchor {
  let released: Promise<void> | undefined;
  return {
    real,
    via,
    child: (name) => `${via}/${name}`,
    stat: () => handle.stat({ bigint: true }),
    release: () => (released ??= handle.close().catch(() => undefined)),
  };
}

/**
 * Takes the directory this process just made at `path` (0700), as it is:
 * a link is not followed, and a directory that is not this process's own
 * with mode 0700 is refused. Whoever may change the directory around it
 * (another user's directory) can move it away or put another in its place,
 * but what it holds is reached through the anchor from then on.
 * @throws FS_IO_ERROR when what is there is not the directory made.
 */
export async function takeOwnDirectory(path: string): Promise<Anchor> {
  const replaced = (): FsFailure => new FsFailure('FS_IO_ERROR', `the directory ${path} was replaced as it was made`);
  const isOwn = (info: { isDirectory(): boolean; uid: number | bigint; mode: number | bigint }): boolean =>
    info.isDirectory() && Number(info.uid) === process.geteuid?.() && (Number(info.mode) & 0o777) === 0o700;
  if (!PROC_FD) {
    if (!isOwn(await lstat(path))) throw replaced();
    const real = await realpath(path);
    return { real, via: real, child: (name) => `${real}${sep}${name}`, stat: () => stat(real, { bigint: true }), release: async () => {} };
  }
  let handle: FileHandle;
  try {
    handle = await open(path, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    // ELOOP: a link was put there; ENOTDIR: something else was.
    if ((error as { code?: unknown }).code === 'ELOOP' || (error as { code?: unknown }).code === 'ENOTDIR') throw replaced();
    throw error;
  }
  try {
    if (!isOwn(await handle.stat())) throw replaced();
    const via = `/proc/self/fd/${handle.fd}`;
    return anchorOf(handle, via, await readlink(via));
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** Runs `use` with the anchor `take` gives, and releases it whatever happens. */
export async function withAnchor<T>(take: Promise<Anchor>, use: (anchor: Anchor) => Promise<T>): Promise<T> {
  const anchor = await take;
  try {
    return await use(anchor);
  } finally {
    await anchor.release();
  }
}
