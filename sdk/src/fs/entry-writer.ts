/**
 * Making an archive's entries inside one directory, following no link on the
 * way: whoever else may change the directory meanwhile (another user who
 * controls part of it) cannot lead a write, a link or a new directory
 * anywhere else, whatever the unpacker's privileges.
 *
 * Every directory on an entry's path is held by a descriptor opened without
 * following a link (`O_PATH | O_NOFOLLOW` on Linux, reached again through
 * `/proc/self/fd`), starting from the directory unpacked into, so a link in
 * the way, put there before or during the unpack, refuses the entry instead
 * of leading it elsewhere. What is at an entry's own name is never written
 * through: a file or a link there is unlinked and the entry made anew,
 * exclusively; a directory there refuses a file. Where there is no
 * `/proc/self/fd` (not Linux) the directories are checked by name just
 * before each step, which a concurrent swap can still race.
 * @module
 */
import { constants } from 'node:fs';
import { link, lstat, mkdir, open, symlink, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { localHost } from '../host.ts';

/** Linux's O_PATH (the same value on x86-64 and arm64); Node does not export it. */
const O_PATH = 0o10000000;
const PROC_FD = localHost.procfs;
/** Directories kept held between entries, most recently used first: entries of one directory usually come together. */
const HELD_DIRECTORIES = 16;

/** Why an entry was not made, for the unpack's warnings. */
export class EntryRefused extends Error {
  override readonly name = 'EntryRefused';
}

interface Held {
  /** The path that reaches exactly this directory. */
  readonly via: string;
  readonly handle: FileHandle | undefined;
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** An entry's path as components inside the directory, or why it has none there. */
export function entryComponents(path: string): string[] | EntryRefused {
  const parts = path.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) return new EntryRefused('a path with .. is not made: it could leave the directory');
  if (parts.some((part) => part.includes('\0'))) return new EntryRefused('a path with a NUL character is not made');
  return parts;
}

/** Makes entries inside one directory; see the module. */
export class EntryWriter {
  readonly #root: Held;
  /** Held directories by their components joined with `/`, most recently used last. */
  readonly #held = new Map<string, Held>();

  private constructor(root: Held) {
    this.#root = root;
  }

  /** A writer into the directory at `cwd`, which must exist (it is followed if it is a link: it is the caller's). */
  static async open(cwd: string): Promise<EntryWriter> {
    if (!PROC_FD) return new EntryWriter({ via: cwd, handle: undefined });
    const handle = await open(cwd, O_PATH | constants.O_DIRECTORY);
    return new EntryWriter({ via: `/proc/self/fd/${handle.fd}`, handle });
  }

  /** Makes the file `parts` with `mode` and `mtime`, its bytes from `data`. */
  async file(parts: readonly string[], mode: number, mtime: Date | undefined, data: AsyncIterable<Buffer>): Promise<void> {
    const at = await this.#entry(parts);
    await clear(at);
    let handle: FileHandle;
    try {
      handle = await open(at, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
    } catch (error) {
      if (codeOf(error) === 'EEXIST') throw new EntryRefused('something was put at its name as it was made');
      throw error;
    }
    try {
      for await (const chunk of data) await handle.write(chunk);
      if (mtime !== undefined) await handle.utimes(mtime, mtime);
    } finally {
      await handle.close();
    }
  }

  /** Makes the directory `parts` (and those above it) with `mode`; one already there is kept as it is. */
  async directory(parts: readonly string[], mode: number): Promise<void> {
    if (parts.length === 0) return;
    await this.#directory(parts, mode);
  }

  /** Makes `parts` a hard link to the entry `target` (components inside the directory too), which must be there. */
  async hardLink(parts: readonly string[], target: readonly string[]): Promise<void> {
    if (target.length === 0) throw new EntryRefused('a hard link to the directory itself is not made');
    const source = `${(await this.#directory(target.slice(0, -1), undefined)).via}/${target.at(-1)!}`;
    const at = await this.#entry(parts);
    await clear(at);
    // link(2) takes the source as it is: a link there is linked to, never followed.
    await link(source, at);
  }

  /** Makes `parts` a symbolic link to `target`, exactly as given. */
  async symbolicLink(parts: readonly string[], target: string): Promise<void> {
    const at = await this.#entry(parts);
    await clear(at);
    await symlink(target, at);
  }

  /** Lets every held directory go. */
  async close(): Promise<void> {
    const held = [...this.#held.values()];
    this.#held.clear();
    await Promise.all([...held, this.#root].map(async (each) => each.handle?.close()));
  }

  /** The path of the entry `parts` in its held directory (made when missing). */
  async #entry(parts: readonly string[]): Promise<string> {
    if (parts.length === 0) throw new EntryRefused('the directory itself is not replaced');
    return `${(await this.#directory(parts.slice(0, -1), 0o777)).via}/${parts.at(-1)!}`;
  }

  /** The directory `parts`, held, each one on the way made when missing and `mode` is given. */
  async #directory(parts: readonly string[], mode: number | undefined): Promise<Held> {
    if (parts.length === 0) return this.#root;
    const key = parts.join('/');
    const known = this.#held.get(key);
    if (known !== undefined) {
      this.#held.delete(key);
      this.#held.set(key, known);
      return known;
    }
    const parent = await this.#directory(parts.slice(0, -1), mode === undefined ? undefined : 0o777);
    const held = await holdChild(parent, parts.at(-1)!, mode);
    this.#held.set(key, held);
    while (this.#held.size > HELD_DIRECTORIES) {
      const [oldest, evicted] = this.#held.entries().next().value!;
      this.#held.delete(oldest);
      await evicted.handle?.close();
    }
    return held;
  }
}

/**
 * A directory held while its entries are walked: `via` reaches exactly it
 * (through its descriptor on Linux), whatever happens to its name.
 */
export interface HeldDirectory {
  readonly via: string;
  close(): Promise<void>;
}

/** The directory at `path`, held (followed if it is a link: the caller's own). */
export async function holdDirectory(path: string): Promise<HeldDirectory> {
  if (!PROC_FD) return { via: path, close: async () => {} };
  const handle = await open(path, O_PATH | constants.O_DIRECTORY);
  let closed: Promise<void> | undefined;
  return { via: `/proc/self/fd/${handle.fd}`, close: () => (closed ??= handle.close()) };
}

/**
 * The directory `name` of the held directory `parentVia`, held without
 * following a link.
 * @throws EntryRefused when a link or something else is there now.
 */
export async function holdSubdirectory(parentVia: string, name: string): Promise<HeldDirectory> {
  const held = await holdChild({ via: parentVia, handle: undefined }, name, undefined);
  return { via: held.via, close: async () => held.handle?.close() };
}

/** The directory `name` of `parent`, held without following a link; made with `mode` when missing and `mode` is given. */
async function holdChild(parent: Held, name: string, mode: number | undefined): Promise<Held> {
  const at = `${parent.via}/${name}`;
  for (let attempt = 0; ; attempt += 1) {
    try {
      if (!PROC_FD) {
        const info = await lstat(at);
        if (!info.isDirectory()) throw Object.assign(new Error(at), { code: info.isSymbolicLink() ? 'ELOOP' : 'ENOTDIR' });
        return { via: join(parent.via, name), handle: undefined };
      }
      const handle = await open(at, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      return { via: `/proc/self/fd/${handle.fd}`, handle };
    } catch (error) {
      const code = codeOf(error);
      if (code === 'ELOOP') throw new EntryRefused(`a link is in the way at ${name}`);
      if (code === 'ENOTDIR') throw new EntryRefused(`something that is not a directory is in the way at ${name}`);
      if (code !== 'ENOENT' || mode === undefined || attempt > 0) throw error;
    }
    try {
      await mkdir(at, { mode });
    } catch (error) {
      // Made meanwhile: it is looked at again, like any directory that was there.
      if (codeOf(error) !== 'EEXIST') throw error;
    }
  }
}

/** Removes what is at `at` unless it is a directory, which is in the way; follows nothing. */
async function clear(at: string): Promise<void> {
  try {
    await unlink(at);
  } catch (error) {
    const code = codeOf(error);
    if (code === 'ENOENT') return;
    if (code === 'EISDIR' || code === 'EPERM') throw new EntryRefused('a directory is in the way');
    throw error;
  }
}
