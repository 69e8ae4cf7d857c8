/**
 * The filesystem seam (`ctx.fs`) on this host: the twelve primitives, as one
 * owner sees the world (confined to a root when it has one).
 *
 * - A target's key is its real path; a file that does not exist yet is keyed
 *   by the real path of its nearest existing ancestor plus the rest.
 * - A version is made of the device, inode, size and nanosecond mtime and
 *   ctime: it changes with any write, rename over or replacement.
 * - Text is strict UTF-8 with no NUL in its first 8 KiB; whole reads and edits
 *   are refused with FS_NOT_TEXT otherwise.
 * - A write stages the new content in a private directory next to the target
 *   (0700, the file 0600, synced) and publishes it by rename, or by link for a
 *   create that must not replace anything. The target's mode, and its owner
 *   when the daemon is root, carry over.
 * - Writes and edits of one target run one at a time (across every owner of
 *   the daemon, through the shared {@link MutationLocks}); the version guard is
 *   checked inside that critical section, before an edit looks for its text.
 *
 * The twelve primitives stay in this one file so that the
 * rules above are read in one place, beside the private steps they share
 * (anchoring, keys, staging and publication). Root confinement is in
 * anchor.ts, text decoding in text.ts.
 * @module
 */
import { createReadStream, type BigIntStats } from 'node:fs';
import { lstat, open, readdir, realpath, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TextDecoder } from 'node:util';
import type {
  FsDirEntry,
  FsEditOutcome,
  FsEditRequest,
  FsInfo,
  FsPathInfo,
  FsProvider,
  FsResolveOptions,
  FsTarget,
  FsWriteIntent,
  FsWriteOutcome,
} from '@execworld/sdk/fs';
import { TextStreamDecoder } from '@execworld/sdk/fs';
import { type Anchor, type DaemonSecrets, PathGuard } from './anchor.ts';
import type { OpenContent } from '../api.ts';
import { LargeReads } from './large-reads.ts';
import { MutationLocks } from './mutation-locks.ts';
import { checkAborted, errnoOf, FsFailure, fromSystemError } from './fs-error.ts';
import { absolutePath, isAbsence, kindOf, versionOf } from './facts.ts';
import { makeStage, place, removeStage } from './staging.ts';
import { applyEdit, BINARY_SAMPLE_BYTES, decodeText, lineEndingsOf, rejectBinaryHead, toLf, withLineEndings } from './text.ts';

export interface WorldFilesOptions {
  /** Every path this view reaches must really lie under it. @default no confinement */
  readonly root?: string | undefined;
  /** The base of relative paths when a call gives none; without one a relative path is refused. */
  readonly cwd?: string | undefined;
  /** A write returns the prior text as `before` only when it and the new text are smaller than this. @default 10 MiB */
  readonly diffBasisMaxBytes?: number;
  /** The largest file `readText` reads whole; larger ones answer FS_TOO_LARGE (`streamText` reads any size). @default unbounded */
  readonly maxTextBytes?: number;
  /** The most entries one `listDir` answers; a larger directory answers FS_TOO_LARGE. @default 100 000 */
  readonly maxListEntries?: number;
  /** Shared by every view of one daemon, so writers of one file through different owners take turns. */
  readonly locks?: MutationLocks;
  /** Shared by every view of one process, so that few content streams read large at once. */
  readonly largeReads?: LargeReads;
  /** The daemon's own files, which this view never reaches. */
  readonly secrets?: DaemonSecrets | undefined;
}

export class WorldFiles implements FsProvider {
  readonly #guard: PathGuard;
  readonly #cwd: string | undefined;
  readonly #diffBasisMaxBytes: number;
  readonly #maxTextBytes: number;
  readonly #maxListEntries: number;
  readonly #locks: MutationLocks;
  readonly #largeReads: LargeReads;

  constructor(options: WorldFilesOptions = {}) {
    this.#guard = new PathGuard(options.root, options.secrets);
    this.#cwd = options.cwd ?? this.#guard.root;
    this.#diffBasisMaxBytes = options.diffBasisMaxBytes ?? 10 * 1024 * 1024;
    this.#maxTextBytes = options.maxTextBytes ?? Number.POSITIVE_INFINITY;
    this.#maxListEntries = options.maxListEntries ?? 100_000;
    this.#locks = options.locks ?? new MutationLocks();
    this.#largeReads = options.largeReads ?? new LargeReads();
  }

  /** The real path every target of this view lies under, if it is confined. */
  get root(): string | undefined {
    return this.#guard.root;
  }

  async resolve(path: string, options?: FsResolveOptions): Promise<FsTarget> {
    checkAborted(options?.signal, 'resolve');
    const displayPath = absolutePath(path, options?.cwd ?? this.#cwd);
    const targetKey = await this.#keyOf(displayPath);
    checkAborted(options?.signal, 'resolve');
    return { targetKey, displayPath };
  }

  processPath(target: FsTarget): string {
    return target.targetKey;
  }

  fileUrl(target: FsTarget): string {
    return pathToFileURL(target.targetKey).href;
  }

  contains(parent: FsTarget, child: FsTarget): boolean {
    const path = relative(parent.targetKey, child.targetKey);
    return path === '' || (path !== '..' && !path.startsWith(`..${sep}`) && !isAbsolute(path));
  }

  async stat(target: FsTarget, signal?: AbortSignal): Promise<FsInfo | undefined> {
    checkAborted(signal, 'stat');
    const info = await this.#statOf(target.targetKey, target.displayPath);
    checkAborted(signal, 'stat');
    return info === undefined ? undefined : { version: versionOf(info), type: kindOf(info), size: Number(info.size) };
  }

  async lstat(path: string, options?: { cwd?: string | undefined }, signal?: AbortSignal): Promise<FsPathInfo | undefined> {
    checkAborted(signal, 'lstat');
    const displayPath = absolutePath(path, options?.cwd ?? this.#cwd);
    const info = await this.#entryStat(displayPath);
    checkAborted(signal, 'lstat');
    if (info === undefined) return undefined;
    return { version: versionOf(info), type: info.isSymbolicLink() ? 'symlink' : kindOf(info), size: Number(info.size) };
  }

  /**
   * The file's text, read whole. `maxBytes` bounds it below the view's own
   * bound (the daemon reads within what it set aside for the answer): a file
   * larger than either, when opened or as read, is FS_TOO_LARGE.
   */
  async readText(target: FsTarget, signal?: AbortSignal, maxBytes?: number): Promise<string> {
    return this.#withRegularFile(target, 'read', signal, async (anchor, info) => {
      const limit = Math.min(this.#maxTextBytes, maxBytes ?? Number.MAX_SAFE_INTEGER);
      const tooLarge = (size: string) =>
        new FsFailure(
          'FS_TOO_LARGE',
          `cannot read "${target.displayPath}" whole: ${size} is more than ${limit}${limit === this.#maxTextBytes ? '; stream it' : ''}`,
        );
      const bytes = await readWithin(anchor, info, limit, signal, tooLarge);
      rejectBinaryHead(bytes, 'read', target.displayPath);
      return decodeText(bytes, 'read', target.displayPath);
    });
  }

  streamText(target: FsTarget, signal?: AbortSignal): Promise<AsyncIterable<string>> {
    // The stream opens at its first read, where a missing file or an abort is reported.
    return Promise.resolve(this.#textChunks(target, signal));
  }

  async *#textChunks(target: FsTarget, signal: AbortSignal | undefined): AsyncGenerator<string> {
    const content = await this.openContent(target, signal);
    const decoder = new TextStreamDecoder(
      (reason, cause) =>
        new FsFailure('FS_NOT_TEXT', `cannot read "${target.displayPath}": ${reason === 'binary' ? 'a binary file (NUL byte)' : 'not UTF-8 text'}`, { cause }),
    );
    const source = content.stream(0);
    try {
      for await (const chunk of source as AsyncIterable<Buffer>) {
        checkAborted(signal, 'read');
        yield decoder.decode(chunk);
      }
      checkAborted(signal, 'read');
      yield decoder.decode();
    } catch (error) {
      throw fromSystemError(error, `read "${target.displayPath}"`);
    } finally {
      source.destroy();
      await content.close();
    }
  }

  async readBytes(target: FsTarget, signal: AbortSignal | undefined, maxBytes: number): Promise<Uint8Array> {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError(`maxBytes must be a non-negative integer, not ${maxBytes}`);
    return this.#withRegularFile(target, 'read', signal, async (anchor, info) => {
      const tooLarge = (size: string) => new FsFailure('FS_TOO_LARGE', `cannot read "${target.displayPath}": ${size} is more than the ${maxBytes}-byte limit`);
      return readWithin(anchor, info, maxBytes, signal, tooLarge);
    });
  }

  async listDir(target: FsTarget, signal?: AbortSignal): Promise<FsDirEntry[]> {
    checkAborted(signal, 'list');
    const doing = `list "${target.displayPath}"`;
    let anchor: Anchor;
    try {
      anchor = await this.#guard.take(target.targetKey, target.displayPath);
    } catch (error) {
      throw fromSystemError(error, doing);
    }
    try {
      const info = await anchor.stat();
      if (!info.isDirectory()) throw new FsFailure('FS_NOT_DIRECTORY', `cannot ${doing}: not a directory`);
      const names = await readdir(anchor.via);
      if (names.length > this.#maxListEntries) {
        throw new FsFailure('FS_TOO_LARGE', `cannot ${doing}: ${names.length} entries is more than the ${this.#maxListEntries} one listing answers`);
      }
      names.sort((left, right) => left.localeCompare(right));
      const entries: FsDirEntry[] = [];
      for (const name of names) {
        checkAborted(signal, 'list');
        entries.push(await this.#listed(anchor, target.displayPath, name));
      }
      checkAborted(signal, 'list');
      return entries;
    } catch (error) {
      throw fromSystemError(error, doing);
    } finally {
      await anchor.release();
    }
  }

  /** One child of a listed directory: its target, and what it is once links are followed (other when broken or out of reach). */
  async #listed(directory: Anchor, displayDirectory: string, name: string): Promise<FsDirEntry> {
    const displayPath = join(displayDirectory, name);
    const lexical = join(directory.real, name);
    let real: string;
    try {
      real = await realpath(directory.child(name));
    } catch (error) {
      if (!isAbsence(error)) throw error;
      return { name, type: 'other', target: { targetKey: lexical, displayPath } };
    }
    if (!this.#guard.allows(real)) return { name, type: 'other', target: { targetKey: lexical, displayPath } };
    let info: BigIntStats;
    try {
      info = await stat(real, { bigint: true });
    } catch (error) {
      if (!isAbsence(error)) throw error;
      return { name, type: 'other', target: { targetKey: real, displayPath } };
    }
    // Looked at again by what it is: a name swapped meanwhile for one of the daemon's files shows nothing of it.
    if (this.#guard.hides(real, info)) return { name, type: 'other', target: { targetKey: lexical, displayPath } };
    const type = kindOf(info);
    return { name, type, target: { targetKey: real, displayPath }, version: versionOf(info), ...(type === 'file' ? { size: Number(info.size) } : {}) };
  }

  async writeText(target: FsTarget, content: string, expected?: FsWriteIntent, signal?: AbortSignal): Promise<FsWriteOutcome> {
    const written = await this.writeBytes(target, Buffer.from(content, 'utf8'), expected, signal);
    return { ...written, after: toLf(content) };
  }

  /** Writes text given as its UTF-8 bytes, as they are (see {@link OwnerFiles.writeBytes}): a large body is not decoded to be encoded again. */
  async writeBytes(target: FsTarget, content: Uint8Array, expected?: FsWriteIntent, signal?: AbortSignal): Promise<Omit<FsWriteOutcome, 'after'>> {
    const doing = `write "${target.displayPath}"`;
    return this.#locks.exclusive(target.targetKey, async () => {
      checkAborted(signal, 'write');
      try {
        const directory = await this.#guard.takeDirectory(dirname(target.targetKey), target.displayPath, true);
        try {
          const name = basename(target.targetKey);
          const existing = await this.#entry(directory, name, target.displayPath);
          try {
            const prior = existing === undefined ? undefined : await existing.stat();
            if (prior !== undefined && !prior.isFile()) throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`);
            if (expected?.kind === 'replaceIfVersion') {
              if (prior === undefined) throw new FsFailure('FS_STALE_VERSION', `cannot ${doing}: it no longer exists`);
              if (versionOf(prior) !== expected.version) throw new FsFailure('FS_STALE_VERSION', `cannot ${doing}: it changed since it was read`);
            } else if (expected?.kind === 'createIfAbsent' && prior !== undefined) {
              throw new FsFailure('FS_NOT_OBSERVED', `cannot ${doing}: it exists and was not read first`);
            }
            const bytes = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
            const before =
              existing !== undefined && prior !== undefined && bytes.length < this.#diffBasisMaxBytes
                ? await priorText(existing.via, this.#diffBasisMaxBytes, signal)
                : null;
            await this.#publish(directory, name, bytes, prior, expected?.kind === 'createIfAbsent', target.displayPath, signal);
            return {
              operation: prior === undefined ? 'create' : 'update',
              version: await this.#versionAfter(directory, name, target),
              before,
            } satisfies Omit<FsWriteOutcome, 'after'>;
          } finally {
            await existing?.release();
          }
        } finally {
          await directory.release();
        }
      } catch (error) {
        throw fromSystemError(error, doing);
      }
    });
  }

  async editText(target: FsTarget, edit: FsEditRequest, expected?: { version: string }, signal?: AbortSignal): Promise<FsEditOutcome> {
    const doing = `edit "${target.displayPath}"`;
    const stale = (why: string) => new FsFailure('FS_STALE_VERSION', `cannot ${doing}: ${why}`);
    return this.#locks.exclusive(target.targetKey, async () => {
      checkAborted(signal, 'edit');
      try {
        let directory: Anchor;
        try {
          directory = await this.#guard.takeDirectory(dirname(target.targetKey), target.displayPath, false);
        } catch (error) {
          if (isAbsence(error)) throw stale('it no longer exists');
          throw error;
        }
        try {
          const name = basename(target.targetKey);
          const existing = await this.#entry(directory, name, target.displayPath);
          if (existing === undefined) throw stale('it no longer exists');
          try {
            const prior = await existing.stat();
            if (!prior.isFile()) throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`);
            if (expected !== undefined && versionOf(prior) !== expected.version) throw stale('it changed since it was read');
            // Read as a whole read is, within the most text the daemon reads at once: the edit's before and after are that text.
            const limit = this.#maxTextBytes;
            const raw = await readWithin(
              existing,
              prior,
              limit,
              signal,
              (size) => new FsFailure('FS_TOO_LARGE', `cannot ${doing}: ${size} is more than ${limit}, the most text an edit reads`),
            );
            checkAborted(signal, 'edit');
            if (raw.includes(0)) throw new FsFailure('FS_NOT_TEXT', `cannot ${doing}: a binary file (NUL byte)`);
            const text = decodeText(raw, 'edit', target.displayPath);
            const before = toLf(text);
            const after = applyEdit(before, edit, target.displayPath);
            await this.#publish(directory, name, Buffer.from(withLineEndings(after, lineEndingsOf(text)), 'utf8'), prior, false, target.displayPath, signal);
            return { version: await this.#versionAfter(directory, name, target), before, after };
          } finally {
            await existing.release();
          }
        } finally {
          await directory.release();
        }
      } catch (error) {
        throw fromSystemError(error, doing);
      }
    });
  }

  /**
   * What `target` is now and, when it is a text file of at most `textMaxBytes`
   * bytes, its text: read from one open file, and kept only when the file's
   * version did not change while it was read. Never fails for the text: a
   * file that is not text, or too large, answers null and a later read says why.
   */
  async look(target: FsTarget, textMaxBytes: number | undefined, signal?: AbortSignal): Promise<{ info: FsInfo | undefined; text: string | null }> {
    checkAborted(signal, 'stat');
    let anchor: Anchor;
    try {
      anchor = await this.#guard.take(target.targetKey, target.displayPath);
    } catch (error) {
      if (isAbsence(error)) return { info: undefined, text: null };
      throw fromSystemError(error, `stat "${target.displayPath}"`);
    }
    try {
      const info = await anchor.stat();
      const facts: FsInfo = { version: versionOf(info), type: kindOf(info), size: Number(info.size) };
      if (textMaxBytes === undefined || !info.isFile() || info.size > BigInt(textMaxBytes) || info.size > this.#maxTextBytes)
        return { info: facts, text: null };
      const text = await readTextOnce(anchor.via, facts.version, Math.min(textMaxBytes, Number(info.size))).catch(() => null);
      checkAborted(signal, 'read');
      return { info: facts, text };
    } finally {
      await anchor.release();
    }
  }

  /**
   * Opens a regular file for streaming: what it is now (size, version) and
   * its bytes from any offset, all of the one file opened, whatever replaces
   * its path meanwhile.
   */
  async openContent(target: FsTarget, signal?: AbortSignal): Promise<OpenContent> {
    return this.#withRegularFile(target, 'read', signal, async (anchor) => {
      const handle = await open(anchor.via, 'r');
      const opened = await handle.stat({ bigint: true });
      let closed: Promise<void> | undefined;
      return {
        info: { size: Number(opened.size), version: versionOf(opened) },
        stream: (start, end) => {
          const { bytes, release } = this.#largeReads.lease();
          const stream = createReadStream('', { fd: handle, start, autoClose: false, highWaterMark: bytes, ...(end === undefined ? {} : { end }) });
          for (const event of ['end', 'error', 'close']) stream.once(event, release);
          return stream;
        },
        close: () => (closed ??= handle.close().catch(() => undefined)),
      };
    });
  }

  /** The real path of `displayPath`, or for a missing one its nearest existing ancestor's real path plus the rest. */
  async #keyOf(displayPath: string): Promise<string> {
    const doing = `resolve "${displayPath}"`;
    try {
      const anchor = await this.#guard.take(displayPath, displayPath);
      await anchor.release();
      return anchor.real;
    } catch (error) {
      if (errnoOf(error) === 'ENOTDIR') throw new FsFailure('FS_NOT_FOUND', `cannot ${doing}: a parent is not a directory`, { cause: error });
      if (errnoOf(error) !== 'ENOENT') throw fromSystemError(error, doing);
    }
    const missing = [basename(displayPath)];
    for (let ancestor = dirname(displayPath); ; ancestor = dirname(ancestor)) {
      try {
        const anchor = await this.#guard.take(ancestor, displayPath, { directory: true });
        await anchor.release();
        return join(anchor.real, ...missing);
      } catch (error) {
        if (errnoOf(error) === 'ENOTDIR') throw new FsFailure('FS_NOT_FOUND', `cannot ${doing}: a parent is not a directory`, { cause: error });
        if (errnoOf(error) !== 'ENOENT' || dirname(ancestor) === ancestor) throw fromSystemError(error, doing);
        missing.unshift(basename(ancestor));
      }
    }
  }

  /** Metadata of what `path` leads to (links followed), undefined when nothing is there. */
  async #statOf(path: string, displayPath: string): Promise<BigIntStats | undefined> {
    let anchor: Anchor;
    try {
      anchor = await this.#guard.take(path, displayPath);
    } catch (error) {
      if (isAbsence(error)) return undefined;
      throw fromSystemError(error, `stat "${displayPath}"`);
    }
    try {
      return await anchor.stat();
    } finally {
      await anchor.release();
    }
  }

  /** Metadata of the entry at `displayPath` itself (a final link not followed), undefined when there is none. */
  async #entryStat(displayPath: string): Promise<BigIntStats | undefined> {
    const doing = `lstat "${displayPath}"`;
    const parent = dirname(displayPath);
    if (parent === displayPath) return this.#statOf(displayPath, displayPath);
    let directory: Anchor;
    try {
      directory = await this.#guard.take(parent, displayPath, { directory: true });
    } catch (error) {
      if (isAbsence(error)) return undefined;
      // The root itself is reachable though its parent is not.
      if (error instanceof FsFailure && this.#guard.root !== undefined) {
        const own = await this.#statOf(displayPath, displayPath).catch(() => undefined);
        if (own !== undefined && (await realpath(displayPath).catch(() => undefined)) === this.#guard.root) return own;
      }
      throw fromSystemError(error, doing);
    }
    try {
      return await lstat(directory.child(basename(displayPath)), { bigint: true });
    } catch (error) {
      if (isAbsence(error)) return undefined;
      throw fromSystemError(error, doing);
    } finally {
      await directory.release();
    }
  }

  /** Runs `use` on the regular file `target` leads to, or throws FS_NOT_FOUND / FS_NOT_REGULAR_FILE. */
  async #withRegularFile<T>(
    target: FsTarget,
    verb: string,
    signal: AbortSignal | undefined,
    use: (anchor: Anchor, info: BigIntStats) => Promise<T>,
  ): Promise<T> {
    checkAborted(signal, verb);
    const doing = `${verb} "${target.displayPath}"`;
    let anchor: Anchor;
    try {
      anchor = await this.#guard.take(target.targetKey, target.displayPath);
    } catch (error) {
      throw fromSystemError(error, doing);
    }
    try {
      const info = await anchor.stat();
      if (!info.isFile()) throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`);
      return await use(anchor, info);
    } catch (error) {
      throw fromSystemError(error, doing);
    } finally {
      await anchor.release();
    }
  }

  /** What the entry `name` of `directory` leads to, held; undefined when nothing is there. */
  async #entry(directory: Anchor, name: string, displayPath: string): Promise<Anchor | undefined> {
    try {
      return await this.#guard.take(directory.child(name), displayPath);
    } catch (error) {
      if (isAbsence(error)) return undefined;
      throw error;
    }
  }

  async #versionAfter(directory: Anchor, name: string, target: FsTarget): Promise<string> {
    const info = await stat(directory.child(name), { bigint: true }).catch(() => undefined);
    return info === undefined ? `gone-${target.targetKey}` : versionOf(info);
  }

  /**
   * Publishes `bytes` as the entry `name` of `directory`: staged in a private
   * directory beside it, synced, given the prior file's mode (and owner, when
   * this process may), then renamed over it, or linked into place when
   * nothing may be replaced.
   */
  async #publish(
    directory: Anchor,
    name: string,
    bytes: Buffer,
    prior: BigIntStats | undefined,
    noReplace: boolean,
    displayPath: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const { handle, ...stage } = await makeStage(directory, '.execworld-');
    const staged = stage.content;
    try {
      try {
        await handle.chmod(0o600);
        await handle.writeFile(bytes, signal === undefined ? {} : { signal });
        await handle.sync();
        if (prior !== undefined) {
          if (process.getuid?.() === 0 && (prior.uid !== 0n || prior.gid !== 0n)) await handle.chown(Number(prior.uid), Number(prior.gid));
          await handle.chmod(Number(prior.mode & 0o777n));
        }
      } finally {
        await handle.close();
      }
      checkAborted(signal, 'write');
      const destination = directory.child(name);
      if (!noReplace) {
        await place(staged, destination, true);
        return;
      }
      let placed: boolean;
      try {
        placed = await place(staged, destination, false);
      } catch (error) {
        throw new FsFailure('FS_IO_ERROR', `cannot create "${displayPath}": ${(error as Error).message}`, { cause: error });
      }
      if (!placed) {
        const there = await lstat(destination).catch(() => undefined);
        if (there !== undefined && !there.isFile()) throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot create "${displayPath}": not a regular file`);
        throw new FsFailure('FS_NOT_OBSERVED', `cannot create "${displayPath}": it exists and was not read first`);
      }
    } finally {
      await removeStage(stage, directory);
    }
  }
}

/**
 * The prior text of a file being replaced, LF-normalised, when it is text
 * smaller than `limit` bytes; null otherwise (binary, not UTF-8, too large,
 * changed size while read, or unreadable).
 */
async function priorText(path: string, limit: number, signal: AbortSignal | undefined): Promise<string | null> {
  checkAborted(signal, 'write');
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (_error) {
    return null;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.size >= limit) return null;
    const buffer = Buffer.allocUnsafe(info.size + 1);
    let length = 0;
    for (;;) {
      checkAborted(signal, 'write');
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length === buffer.length) return null;
    }
    if (length !== info.size) return null;
    const bytes = buffer.subarray(0, length);
    if (bytes.includes(0)) return null;
    try {
      return toLf(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    } catch (_error) {
      return null;
    }
  } catch (error) {
    if (error instanceof FsFailure) throw error;
    return null;
  } finally {
    await handle.close();
  }
}

/**
 * The bytes of the regular file `anchor` (`info` its stat when opened), at
 * most `limit`: `tooLarge` says why not when its size, or what is read (a file
 * that grew, or one that gives no size, as those of /proc), is more.
 */
async function readWithin(
  anchor: Anchor,
  info: BigIntStats,
  limit: number,
  signal: AbortSignal | undefined,
  tooLarge: (size: string) => FsFailure,
): Promise<Buffer> {
  if (info.size > limit) throw tooLarge(`${info.size} bytes`);
  const handle = await open(anchor.via, 'r');
  try {
    // One byte past the limit tells a file that grew since its stat; a file read to its buffer's end is read on into a larger one.
    let buffer = Buffer.allocUnsafe(Math.min(limit + 1, Number(info.size) + 64 * 1024));
    let length = 0;
    for (;;) {
      checkAborted(signal, 'read');
      if (length === buffer.length) {
        if (length > limit) throw tooLarge('the content');
        const larger = Buffer.allocUnsafe(Math.min(limit + 1, buffer.length * 2));
        buffer.copy(larger, 0, 0, length);
        buffer = larger;
      }
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > limit) throw tooLarge('the content');
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}

/** The text of the file at `path` if it is still at `version` once read, is text, and holds at most `maxBytes` (its size at that version); null otherwise. */
async function readTextOnce(path: string, version: string, maxBytes: number): Promise<string | null> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.allocUnsafe(maxBytes + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length === buffer.length) return null;
    }
    if (versionOf(await handle.stat({ bigint: true })) !== version) return null;
    const bytes = buffer.subarray(0, length);
    if (bytes.subarray(0, BINARY_SAMPLE_BYTES).includes(0)) return null;
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch (_error) {
      return null;
    }
  } finally {
    await handle.close();
  }
}
