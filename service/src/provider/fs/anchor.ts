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
import { close, constants, fstat } from 'node:fs';
import { lstatSync, realpathSync, statSync, type BigIntStats } from 'node:fs';
import { lstat, mkdir, open, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, normalize, sep } from 'node:path';
import { hostFacts } from '../platform/host.ts';
import { FsFailure } from './fs-error.ts';

/** Linux's O_PATH (the same value on x86-64 and arm64); Node does not export it. */
export const O_PATH = 0o10000000;
/** Whether an open descriptor is reached again through `/proc/self/fd/<fd>`: on Linux. */
export const PROC_FD = hostFacts.procfs;

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
  /** The O_PATH descriptor that holds it, where one does (with /proc): what a takeover keeps across the exec. */
  readonly fd?: number;
}

/** Whether `real` is `root` or lies under it. */
export function isWithin(root: string, real: string): boolean {
  if (root === sep) return real.startsWith(sep);
  return real === root || real.startsWith(root + sep);
}

/**
 * The daemon's own files and directories (its token file, TLS key, state
 * directory), as plain data a worker can be started with. `except` names
 * directories inside them that owners do reach (the spill directory).
 */
export interface SecretPaths {
  readonly files: readonly string[];
  readonly directories: readonly string[];
  readonly except?: readonly string[];
}

/**
 * The daemon's secrets, which no owner's file call reaches, whatever its
 * access: by path (their real paths and the paths they were named by) and,
 * for files, by identity, so that another name for one (a hard link) is no
 * way in either.
 */
export class DaemonSecrets {
  readonly #files: string[];
  readonly #identities = new Set<string>();
  readonly #directories: string[];
  readonly #except: string[];

  constructor(paths: SecretPaths) {
    this.#files = paths.files.flatMap(namesOf);
    this.#directories = [...paths.directories, ...paths.files.flatMap(rotatedDirectory)].flatMap(namesOf);
    this.#except = (paths.except ?? []).flatMap(namesOf);
    for (const file of paths.files) {
      try {
        const info = statSync(file, { bigint: true });
        this.#identities.add(`${info.dev}:${info.ino}`);
      } catch (_error) {
        // Not there (yet): it is known by its path.
      }
    }
  }

  /** Whether the real path `real` is a secret or lies inside a secret directory. */
  holds(real: string): boolean {
    if (this.#files.includes(real)) return true;
    return this.#directories.some((directory) => isWithin(directory, real)) && !this.#except.some((directory) => isWithin(directory, real));
  }

  /** Whether the object `info` describes is a secret file, by whatever name it was reached. */
  isFile(info: { readonly dev: bigint | number; readonly ino: bigint | number }): boolean {
    return this.#identities.size > 0 && this.#identities.has(`${BigInt(info.dev)}:${BigInt(info.ino)}`);
  }

  /** Whether a secret lies at or under the real path `real`: removing or moving it would reach one. */
  under(real: string): boolean {
    return this.holds(real) || [...this.#files, ...this.#directories].some((secret) => isWithin(real, secret));
  }
}

/**
 * The directory of the file `path` when that file is one of a set the
 * Kubernetes atomic writer keeps (a Secret, ConfigMap or projected volume):
 * `<dir>/token` is a link to `..data/token`, and `..data` a link to a
 * timestamped `..2026_12_05_…` directory beside it. A rotation writes a new
 * timestamped directory and swaps `..data` to it, so the file's real path
 * changes: the whole volume is a secret, or the new copy would be served (by
 * its real path, and by `path` itself, which now leads there). The volume is
 * the directory that holds the timestamped one the real path goes through,
 * with `..data` beside it, wherever `path` names the file from: `<dir>/token`,
 * or an item in a folder (`items: path: sub/token`, where only the top entry
 * `<dir>/sub` is a link, to `..data/sub`, and the file's own directory is
 * inside the timestamped one), or `..data/token` itself.
 */
function rotatedDirectory(path: string): string[] {
  const named = normalize(path);
  try {
    const parts = realpathSync(named).split(sep);
    // A real path holds no `..` entry: a name that starts with `..` is one of the writer's.
    for (let index = parts.length - 2; index >= 1; index -= 1) {
      if (!parts[index]!.startsWith('..')) continue;
      const volume = parts.slice(0, index).join(sep) || sep;
      if (volume !== sep && lstatSync(join(volume, '..data'), { throwIfNoEntry: false })?.isSymbolicLink() === true) return [dirname(named), volume];
    }
    return [];
  } catch (_error) {
    return [];
  }
}

/** The absolute path `path` and, when it differs, its real path. */
function namesOf(path: string): string[] {
  const named = normalize(path);
  try {
    const real = realpathSync(named);
    return real === named ? [named] : [named, real];
  } catch (_error) {
    return [named];
  }
}

/**
 * The rule of one owner's view of the world: everything it reaches must
 * really lie under `root` (all of the world when there is none), and none of
 * it may be one of the daemon's secrets.
 */
export class PathGuard {
  /** The root's real path; undefined confines nothing. */
  readonly root: string | undefined;
  readonly #secrets: DaemonSecrets | undefined;

  constructor(root: string | undefined, secrets?: DaemonSecrets) {
    if (root !== undefined && !isAbsolute(root)) throw new Error(`a filesystem root must be an absolute path, not ${root}`);
    this.root = root === undefined ? undefined : realpathSync(normalize(root));
    this.#secrets = secrets;
  }

  /** Whether the real path `real` may be reached. */
  allows(real: string): boolean {
    return (this.root === undefined || isWithin(this.root, real)) && this.#secrets?.holds(real) !== true;
  }

  /** Throws FS_PERMISSION_DENIED unless `real` may be reached. */
  check(real: string, displayPath: string): void {
    if (this.#secrets?.holds(real) === true) throw secretRefusal(displayPath);
    if (!this.allows(real)) throw new FsFailure('FS_PERMISSION_DENIED', `"${displayPath}" is outside this owner's root`);
  }

  /** Whether the real path `real` (or the file `info` describes) is one of the daemon's secrets, which a walk of a tree leaves out. */
  hides(real: string, info?: { readonly dev: bigint | number; readonly ino: bigint | number }): boolean {
    return this.#secrets !== undefined && (this.#secrets.holds(real) || (info !== undefined && this.#secrets.isFile(info)));
  }

  /** Throws FS_PERMISSION_DENIED when a secret lies at or under the real path `real` (a tree to remove or move). */
  checkTree(real: string, displayPath: string): void {
    if (this.#secrets?.under(real) === true) throw secretRefusal(displayPath);
  }

  /** Throws FS_PERMISSION_DENIED when what `info` describes is one of the daemon's secret files, by whatever name it was reached. */
  checkIdentity(info: { readonly dev: bigint | number; readonly ino: bigint | number }, displayPath: string): void {
    if (this.#secrets?.isFile(info) === true) throw secretRefusal(displayPath);
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
      if (this.#secrets !== undefined) this.checkIdentity(await stat(real, { bigint: true }), displayPath);
      return {
        real,
        via: real,
        child: (name) => this.#checkedChild(real, name, `${real}${real.endsWith(sep) ? '' : sep}${name}`),
        stat: () => stat(real, { bigint: true }),
        release: async () => {},
      };
    }
    const handle = await open(path, O_PATH | (options.directory === true ? constants.O_DIRECTORY : 0));
    try {
      const via = `/proc/self/fd/${handle.fd}`;
      const real = await readlink(via);
      const held = await handle.stat({ bigint: true });
      await this.#checkReadsBack(real, held, displayPath);
      this.check(real, displayPath);
      if (this.#secrets !== undefined) this.checkIdentity(held, displayPath);
      return anchorOf(handle, via, real, (name, childPath) => this.#checkedChild(real, name, childPath));
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /**
   * Refuses an object whose real path, read back from its descriptor, does
   * not lead to it in this process's own view of the filesystem: the path
   * the kernel gives is the one it has in the mount namespace it was reached
   * through, and a path through `/proc/<pid>/root` of a process in a
   * namespace of its own (which any user may make, with `/` bound anywhere)
   * would otherwise read back as a path it never was here, passing the
   * root and secret checks. An object moved meanwhile is refused the same way.
   */
  async #checkReadsBack(real: string, held: BigIntStats, displayPath: string): Promise<void> {
    if (this.root === undefined && this.#secrets === undefined) return;
    const here = await stat(real, { bigint: true }).catch(() => undefined);
    if (here === undefined || here.dev !== held.dev || here.ino !== held.ino) {
      throw new FsFailure('FS_PERMISSION_DENIED', `"${displayPath}" is not where its path leads here (another mount namespace, or it moved meanwhile)`);
    }
  }

  /** `childPath`, the path of the entry `name` of the directory at `real`, unless that entry is one of the daemon's secrets. */
  #checkedChild(real: string, name: string, childPath: string): string {
    const lexical = `${real}${real.endsWith(sep) ? '' : sep}${name}`;
    if (this.#secrets?.holds(lexical) === true) throw secretRefusal(lexical);
    return childPath;
  }

  /**
   * The anchor this guard took in the previous image of the daemon (a
   * takeover), on the descriptor the exec kept: its children are vetted as
   * this guard's anchors' are.
   */
  adopt(fd: number, real: string): Anchor {
    return anchorOfDescriptor(fd, real, (name, childPath) => this.#checkedChild(real, name, childPath));
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

/** The anchor of `handle`; `check` vets each child path it hands out. */
function anchorOf(handle: FileHandle, via: string, real: string, check: (name: string, childPath: string) => string = (_name, childPath) => childPath): Anchor {
  let released: Promise<void> | undefined;
  return {
    real,
    via,
    child: (name) => check(name, `${via}/${name}`),
    stat: () => handle.stat({ bigint: true }),
    release: () => (released ??= handle.close().catch(() => undefined)),
    fd: handle.fd,
  };
}

/**
 * An anchor on a bare descriptor the previous image of the daemon held (a
 * takeover keeps it across the exec, where no FileHandle survives); `check`
 * vets each child path it hands out.
 */
export function anchorOfDescriptor(fd: number, real: string, check: (name: string, childPath: string) => string = (_name, childPath) => childPath): Anchor {
  const via = `/proc/self/fd/${fd}`;
  let released: Promise<void> | undefined;
  return {
    real,
    via,
    child: (name) => check(name, `${via}/${name}`),
    stat: () => new Promise((resolve, reject) => fstat(fd, { bigint: true }, (error, stats) => (error === null ? resolve(stats) : reject(error)))),
    release: () => (released ??= new Promise((resolve) => close(fd, () => resolve()))),
    fd,
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

function secretRefusal(displayPath: string): FsFailure {
  return new FsFailure('FS_PERMISSION_DENIED', `"${displayPath}" is the daemon's own: no owner reaches it`);
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
