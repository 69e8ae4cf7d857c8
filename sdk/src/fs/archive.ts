/**
 * A directory as a tar stream, the one way both ends make and take it.
 *
 * Packing walks the directory one entry at a time: files, directories and
 * links are archived (links as links, never followed; hard links to a file
 * archived before as links to it; modes kept, owners left out), and special
 * files (sockets, FIFOs, devices) are left out and listed, as they have no
 * bytes to copy. Only one file is open at once, and the stream's end,
 * or its destruction by a reader that went away, closes it.
 *
 * Unpacking makes each entry through directories held from the one unpacked
 * into, following no link (entry-writer.ts): a path with `..`, a link in the
 * way (put there before the unpack or swapped in during it) and a hard link
 * to a path outside are refused, owners are never taken from the archive,
 * and symbolic links are made last, with their targets exactly as archived
 * (an absolute one stays absolute). Made last, no link can be in the way of
 * an entry of the same archive.
 * @module
 */
import { constants, createReadStream, type BigIntStats } from 'node:fs';
import { lstat, mkdtemp, open, readdir, readlink, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import { localHost } from '../host.ts';
import { entryComponents, EntryRefused, EntryWriter, holdDirectory, holdSubdirectory, type HeldDirectory } from './entry-writer.ts';

/** The most warnings an unpack lists. */
const MAX_WARNINGS = 100;

/** What an unpacked archive did: its entries, and what was refused or changed in them, with why. */
export interface ArchiveResult {
  readonly entries: number;
  readonly warnings: readonly { readonly path: string; readonly message: string }[];
}

/**
 * Entries read and waiting to be made, at most: past it, the archive is read
 * no further until some are made. (An entry with no data, a directory or a
 * link, never holds the parser back, so without a bound an archive of many
 * small entries would queue them all.)
 */
const MAX_ENTRIES_WAITING = 256;

/** Bytes of symbolic links (paths and targets) kept in memory until the end; past it, they are set aside in a file. */
const LINKS_IN_MEMORY_BYTES = 1024 * 1024;

/**
 * The symbolic links of an archive, made last: in memory while they are few,
 * then in a private temporary file (one JSON line each), so an archive of any
 * number of links costs bounded memory.
 */
class PendingLinks {
  #memory: [path: string, target: string][] = [];
  #memoryBytes = 0;
  #spill: { readonly directory: string; readonly file: FileHandle } | undefined;

  add(path: string, target: string): void {
    this.#memory.push([path, target]);
    this.#memoryBytes += path.length + target.length;
  }

  /** Whether the links in memory should be set aside before more of the archive is read. */
  get full(): boolean {
    return this.#memoryBytes >= LINKS_IN_MEMORY_BYTES;
  }

  /** Sets the links in memory aside in the temporary file (made at the first call: 0700 directory, 0600 file). */
  async setAside(): Promise<void> {
    if (this.#memory.length === 0) return;
    if (this.#spill === undefined) {
      const directory = await mkdtemp(join(tmpdir(), 'execworld-links-'));
      this.#spill = { directory, file: await open(join(directory, 'links'), 'wx', 0o600) };
    }
    const lines = this.#memory.map((link) => `${JSON.stringify(link)}\n`).join('');
    this.#memory = [];
    this.#memoryBytes = 0;
    await this.#spill.file.write(lines);
  }

  /** Every link, in archive order. */
  async *all(): AsyncGenerator<[path: string, target: string]> {
    if (this.#spill === undefined) {
      yield* this.#memory;
      return;
    }
    await this.setAside();
    const lines = createInterface({ input: createReadStream(join(this.#spill.directory, 'links'), 'utf8'), crlfDelay: Infinity });
    for await (const line of lines) yield JSON.parse(line) as [string, string];
  }

  async discard(): Promise<void> {
    const spill = this.#spill;
    this.#spill = undefined;
    this.#memory = [];
    if (spill === undefined) return;
    await spill.file.close().catch(() => undefined);
    await rm(spill.directory, { recursive: true, force: true });
  }
}

/** How an unpack may be narrowed. */
export interface UnpackOptions {
  readonly signal?: AbortSignal | undefined;
  /** The permission bits an entry may carry (an unpacker that is root takes no setuid, setgid or sticky bit: 0o777). @default 0o7777 */
  readonly modeBits?: number;
  /** Why the entry `path` (relative to the directory), or the file a hard link `linkpath` names, may not be unpacked; undefined when it may. */
  readonly refuse?: (path: string, linkpath: string | undefined) => string | undefined;
}

/**
 * Unpacks the tar stream `body` into the directory `cwd` (which must exist),
 * following no link on the way (see entry-writer.ts): files, directories and
 * hard links as they come, symbolic links last, with their targets exactly as
 * archived. An entry that would leave the directory (`..`, a link in the way,
 * a hard link to a path outside) or that is a device or a FIFO is not made,
 * and is listed in the warnings; a leading `/` is taken off. Memory stays
 * bounded whatever the number of entries: entries are made one at a time
 * with at most {@link MAX_ENTRIES_WAITING} read ahead, and links wait in a
 * temporary file past 1 MiB of them.
 */
export async function unpackArchive(body: Readable, cwd: string, options: UnpackOptions = {}): Promise<ArchiveResult> {
  const { signal, modeBits = 0o7777, refuse } = options;
  let entries = 0;
  const warnings: { path: string; message: string }[] = [];
  const warn = (path: string, message: string): void => {
    if (warnings.length < MAX_WARNINGS) warnings.push({ path, message });
  };
  const pending = new PendingLinks();
  const writer = await EntryWriter.open(cwd);

  /** Makes one entry, or says why it was not made; its data is read to its end either way. */
  const make = async (entry: tar.ReadEntry): Promise<void> => {
    const path = entry.path;
    const parts = componentsOf(path, warn);
    const linkParts = entry.type === 'Link' ? componentsOf(entry.linkpath ?? '', warn) : undefined;
    const refusal = parts instanceof EntryRefused ? parts : linkParts instanceof EntryRefused ? linkParts : refuse?.(parts.join('/'), linkParts?.join('/'));
    if (refusal !== undefined) {
      warn(path, typeof refusal === 'string' ? refusal : refusal.message);
      return;
    }
    const parsed = parts as string[];
    const mode = (entry.mode ?? (entry.type === 'Directory' ? 0o777 : 0o666)) & modeBits;
    switch (entry.type) {
      case 'File':
      case 'OldFile':
      case 'ContiguousFile':
        await writer.file(parsed, mode, entry.mtime, entry as AsyncIterable<Buffer>);
        return;
      case 'Directory':
        await writer.directory(parsed, mode);
        return;
      case 'Link':
        await writer.hardLink(parsed, linkParts as string[]);
        return;
      case 'SymbolicLink':
        // Made last: no link of the archive is in the way of its other entries.
        pending.add(parsed.join('/'), entry.linkpath ?? '');
        return;
      default:
        warn(path, `a ${entry.type} is not made: only files, directories and links are`);
    }
  };

  let waiting = 0;
  let wake: (() => void) | undefined;
  let made: Promise<void> = Promise.resolve();
  const parser = new tar.Parser({
    onwarn: (_code, message, data) => {
      const path = (data as { entry?: { path?: unknown } } | undefined)?.entry?.path ?? (data as { path?: unknown } | undefined)?.path;
      warn(typeof path === 'string' ? path : '', message);
    },
  });
  parser.on('entry', (entry: tar.ReadEntry) => {
    entries += 1;
    // Read by its turn: the parser goes past an entry with data only once it was read.
    entry.pause();
    waiting += 1;
    made = made.then(async () => {
      try {
        await make(entry);
      } catch (error) {
        warn(entry.path, error instanceof EntryRefused ? error.message : `not made: ${error instanceof Error ? error.message : String(error)}`);
      } finally {
        entry.resume();
        waiting -= 1;
        if (waiting < MAX_ENTRIES_WAITING) wake?.();
      }
    });
  });
  /** Passes the archive on to the parser only while few entries wait to be made, and once the links read so far are set aside when they are many. */
  const gate = new Transform({
    transform(chunk: Buffer, _encoding, passed) {
      void (async () => {
        if (pending.full) await pending.setAside();
        while (waiting >= MAX_ENTRIES_WAITING) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      })().then(
        () => passed(null, chunk),
        (error: unknown) => passed(error as Error),
      );
    },
  });
  try {
    try {
      await pipeline(body, gate, parser as unknown as NodeJS.WritableStream, signal === undefined ? {} : { signal });
    } finally {
      await made;
    }
    for await (const [path, target] of pending.all()) {
      if (target === '' || target.includes('\0')) {
        warn(path, 'a link with no target is not made');
        continue;
      }
      try {
        await writer.symbolicLink(path.split('/'), target);
      } catch (error) {
        warn(path, error instanceof EntryRefused ? error.message : `the link was not made: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  } finally {
    await Promise.all([pending.discard(), writer.close()]);
  }
  return { entries, warnings };
}

/** An entry's path as components inside the directory, with a warning when a leading `/` was taken off. */
function componentsOf(path: string, warn: (path: string, message: string) => void): string[] | EntryRefused {
  if (path.startsWith('/')) warn(path, 'the leading / was taken off');
  return entryComponents(path);
}

/** What kind of special file a pack left out. */
export type SkippedKind = 'socket' | 'fifo' | 'character device' | 'block device' | 'other';

/** The special files a pack left out: every one counted, the first ones listed (paths relative to the directory). */
export interface PackSkips {
  count: number;
  readonly entries: { readonly path: string; readonly kind: SkippedKind }[];
}

/** A directory's tar stream, and what it leaves out (complete once the stream ended). */
export interface PackedArchive {
  readonly stream: Readable;
  readonly skipped: PackSkips;
}

/** The most special files a pack lists by path (all are counted). */
export const MAX_SKIPPED_LISTED = 100;
/** Bytes a file's data is read in. */
const PACK_READ_BYTES = 1024 * 1024;
/** Files with several links whose first path is remembered, so that the others are archived as links to it; past this, as files. */
const MAX_HARD_LINK_SOURCES = 10_000;
/**
 * A file is opened without following a link (one swapped in after its lstat
 * fails instead of leading elsewhere) and without blocking (a FIFO swapped in
 * would otherwise hold the open until a writer came); where the platform has
 * neither flag, without them.
 */
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);
/** The end of an archive: two zero blocks. */
const END_OF_ARCHIVE = Buffer.alloc(1024);

const toArchivePath = localHost.backslashPaths ? (path: string): string => path.replaceAll('\\', '/') : (path: string): string => path;

function kindOf(info: BigIntStats): SkippedKind {
  if (info.isSocket()) return 'socket';
  if (info.isFIFO()) return 'fifo';
  if (info.isCharacterDevice()) return 'character device';
  if (info.isBlockDevice()) return 'block device';
  return 'other';
}

/** Permission bits as tar's portable mode writes them: the owner may always read and write, nobody else write; a readable directory is listable. */
function portableMode(mode: number, isDirectory: boolean): number {
  let bits = ((mode & 0o7777) | 0o600) & ~0o22;
  if (isDirectory) {
    if (bits & 0o400) bits |= 0o100;
    if (bits & 0o40) bits |= 0o10;
    if (bits & 0o4) bits |= 0o1;
  }
  return bits;
}

/** The header block of an entry, after a PAX header when its path or link does not fit ustar's fields. */
function headerOf(fields: {
  path: string;
  type: 'File' | 'Directory' | 'SymbolicLink' | 'Link';
  mode: number;
  size: number;
  mtime?: Date;
  linkpath?: string;
}): Buffer {
  const header = new tar.Header(fields);
  const needsPax = header.encode();
  const block = header.block!;
  if (!needsPax) return block;
  const { path, linkpath, size, mtime } = fields;
  const pax = new tar.Pax({ path, size, ...(linkpath === undefined ? {} : { linkpath }), ...(mtime === undefined ? {} : { mtime }) }).encode();
  return Buffer.concat([pax, block]);
}

/** How a pack may be narrowed. */
export interface PackOptions {
  /**
   * Whether the entry `path` (relative to the directory), as `info`
   * describes it, is left out without a word: the daemon leaves its own files
   * out so (they are not listed as skipped, which would name them).
   */
  readonly hide?: (path: string, info: { readonly dev: bigint; readonly ino: bigint }) => boolean;
}

/**
 * Packs the directory `cwd` (its entries, relative to it) as a tar stream.
 * The top level is listed before the stream is returned, so a directory that
 * cannot be read fails the call itself; an entry that fails later (a file
 * that cannot be opened, one that shrank while it was read) fails the stream.
 */
export async function packArchive(cwd: string, options: PackOptions = {}): Promise<PackedArchive> {
  const hide = options.hide ?? (() => false);
  // Every directory is walked held, reached through its descriptor: one swapped for a link meanwhile is not entered.
  const top = await holdDirectory(cwd);
  let names: string[];
  try {
    names = (await readdir(top.via)).sort();
  } catch (error) {
    await top.close();
    throw error;
  }
  const skipped: PackSkips = { count: 0, entries: [] };
  const linkSources = new Map<string, string>();

  const skip = (path: string, kind: SkippedKind): void => {
    skipped.count += 1;
    if (skipped.entries.length < MAX_SKIPPED_LISTED) skipped.entries.push({ path, kind });
  };
  const replaced = (path: string): Error => Object.assign(new Error(`${path} was replaced while it was packed`), { code: 'EAGAIN' });

  async function* file(path: string, absolute: string, info: BigIntStats): AsyncGenerator<Buffer> {
    let handle: FileHandle;
    try {
      handle = await open(absolute, OPEN_FLAGS);
    } catch (error) {
      // Gone since its lstat: there is nothing of it to archive.
      if ((error as { code?: unknown }).code === 'ENOENT') return;
      throw error;
    }
    try {
      const opened = await handle.stat({ bigint: true });
      if (hide(path, opened)) return;
      // Replaced since its lstat: left out as the special file it now is, or refused as changed.
      if (!opened.isFile()) {
        skip(path, kindOf(opened));
        return;
      }
      if (opened.ino !== info.ino || opened.dev !== info.dev) throw replaced(path);
      // The header says the size of the file as opened; exactly that many bytes follow it.
      const size = Number(opened.size);
      yield headerOf({ path, type: 'File', mode: portableMode(Number(opened.mode), false), size, mtime: opened.mtime });
      let remaining = size;
      while (remaining > 0) {
        const buffer = Buffer.allocUnsafe(Math.min(remaining, PACK_READ_BYTES));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, size - remaining);
        if (bytesRead === 0) throw Object.assign(new Error(`${path} shrank while it was packed`), { code: 'EAGAIN' });
        remaining -= bytesRead;
        yield buffer.subarray(0, bytesRead);
      }
      if (size % 512 !== 0) yield Buffer.alloc(512 - (size % 512));
    } finally {
      await handle.close();
    }
  }

  /** The entry `name` of the held directory `parentVia`, archived as `path`. */
  async function* entry(parentVia: string, name: string, path: string): AsyncGenerator<Buffer> {
    const absolute = `${parentVia}/${name}`;
    let info: BigIntStats;
    try {
      info = await lstat(absolute, { bigint: true });
    } catch (error) {
      // Gone since its directory was listed: there is nothing of it to archive.
      if ((error as { code?: unknown }).code === 'ENOENT') return;
      throw error;
    }
    if (hide(path, info)) return;
    const mode = Number(info.mode);
    if (info.isDirectory()) {
      let directory: HeldDirectory;
      try {
        directory = await holdSubdirectory(parentVia, name);
      } catch (error) {
        if (error instanceof EntryRefused) throw replaced(path);
        if ((error as { code?: unknown }).code === 'ENOENT') return;
        throw error;
      }
      try {
        // As tar's portable mode: a directory's mtime is left out.
        yield headerOf({ path: `${path}/`, type: 'Directory', mode: portableMode(mode, true), size: 0 });
        for (const child of (await readdir(directory.via)).sort()) yield* entry(directory.via, child, `${path}/${toArchivePath(child)}`);
      } finally {
        await directory.close();
      }
    } else if (info.isSymbolicLink()) {
      const linkpath = toArchivePath(await readlink(absolute));
      yield headerOf({ path, type: 'SymbolicLink', mode: portableMode(mode, false), size: 0, mtime: info.mtime, linkpath });
    } else if (info.isFile()) {
      const key = `${info.dev}:${info.ino}`;
      const source = info.nlink > 1n ? linkSources.get(key) : undefined;
      if (source !== undefined) {
        yield headerOf({ path, type: 'Link', mode: portableMode(mode, false), size: 0, mtime: info.mtime, linkpath: source });
        return;
      }
      yield* file(path, absolute, info);
      if (info.nlink > 1n && linkSources.size < MAX_HARD_LINK_SOURCES) linkSources.set(key, path);
    } else skip(path, kindOf(info));
  }

  async function* archive(): AsyncGenerator<Buffer> {
    try {
      for (const name of names) yield* entry(top.via, name, toArchivePath(name));
      yield END_OF_ARCHIVE;
    } finally {
      await top.close();
    }
  }

  // Destroyed early (a reader that went away), the generator is returned: the open file and the held directories close in their finallys,
  // and the top one with the stream, which may end before the generator ever ran.
  const stream = Readable.from(archive(), { objectMode: false });
  stream.once('close', () => void top.close());
  return { stream, skipped };
}

/**
 * Bytes of the trailer that lists a pack's special files, at most: Node's
 * client refuses headers and trailers past 16 KiB, so entries that do not
 * fit are counted only.
 */
const MAX_SKIPPED_TRAILER_BYTES = 8 * 1024;

/** JSON in ASCII: other characters as \u escapes, so the text is a valid header value whatever the paths hold. */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The value of the skipped-files trailer: `{"count":N,"entries":[{"path":…,"kind":…},…]}`, listing as many entries as fit. */
export function skippedTrailer(skips: PackSkips): string {
  const listed: PackSkips['entries'] = [];
  let bytes = asciiJson({ count: skips.count, entries: [] }).length;
  for (const entry of skips.entries) {
    const more = asciiJson(entry).length + 1;
    if (bytes + more > MAX_SKIPPED_TRAILER_BYTES) break;
    listed.push(entry);
    bytes += more;
  }
  return asciiJson({ count: skips.count, entries: listed });
}

/** The special files a skipped-files trailer names; undefined for a value that is not one. */
export function parseSkippedTrailer(value: unknown): PackSkips | undefined {
  if (typeof value !== 'string') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (_error) {
    return undefined;
  }
  const { count, entries } = (parsed ?? {}) as { count?: unknown; entries?: unknown };
  if (typeof count !== 'number' || !Array.isArray(entries)) return undefined;
  const valid = entries.filter(
    (entry): entry is PackSkips['entries'][number] =>
      typeof (entry as { path?: unknown } | null)?.path === 'string' && typeof (entry as { kind?: unknown }).kind === 'string',
  );
  return { count, entries: valid };
}

/** A pack's special files as an unpack's warnings: one per listed file, and one counting those not listed. */
export function skippedWarnings(skips: PackSkips): ArchiveResult['warnings'] {
  const warnings = skips.entries.map(({ path, kind }) => ({ path, message: `not copied: a ${kind} (only files, directories and links are)` }));
  const unlisted = skips.count - skips.entries.length;
  if (unlisted > 0) warnings.push({ path: '', message: `${unlisted} more special files (sockets, FIFOs, devices) were not copied` });
  return warnings;
}
