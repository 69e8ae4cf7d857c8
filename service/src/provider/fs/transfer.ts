/**
 * Files beyond the seam, for people and other frameworks: mkdir, remove,
 * rename, a file's digest, uploads of any size staged beside their target and
 * published atomically, and directories packed and unpacked as tar streams.
 * Every path goes through the same {@link PathGuard} as the seam's
 * primitives, so an owner confined to a root stays in it.
 * @module
 */
import { createReadStream } from 'node:fs';
import { lstat, mkdir, open, rename, rmdir, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { packArchive, unpackArchive, type FileDigest, type PackedArchive } from '@execworld/sdk/fs';
import { renameNoReplace } from '../posix/libc.ts';
import { anchorOfDescriptor, withAnchor, type Anchor, type PathGuard } from './anchor.ts';
import { absolutePath, isAbsence, versionOf } from './facts.ts';
import { checkAborted, errnoOf, FsFailure, fromSystemError } from './fs-error.ts';
import { clientModeBits, hashOf, StagedUpload } from './staged-upload.ts';
import { removeTree } from './remove-tree.ts';
import { makeStage } from './staging.ts';
import type { MutationLocks } from './mutation-locks.ts';
import type { OwnerTransfer, Unpacked, UploadStageRecord } from '../api.ts';

/** How often a digest is retried when the file changes while it is read. */
const DIGEST_ATTEMPTS = 3;

/** The transfer calls as one owner sees the world (confined to a root when it has one). */
export class WorldTransfer implements OwnerTransfer {
  readonly #guard: PathGuard;
  readonly #cwd: string | undefined;
  readonly #locks: MutationLocks;

  constructor(guard: PathGuard, cwd: string | undefined, locks: MutationLocks) {
    this.#guard = guard;
    this.#cwd = cwd;
    this.#locks = locks;
  }

  /** Makes the directory at `path` (and its missing parents with `parents`); with `parents` one already there is success. */
  async mkdir(path: string, options: { cwd?: string | undefined; parents: boolean }, signal?: AbortSignal): Promise<{ path: string; created: boolean }> {
    const displayPath = absolutePath(path, options.cwd ?? this.#cwd);
    const doing = `make directory "${displayPath}"`;
    checkAborted(signal, doing);
    try {
      const parent = await this.#guard.takeDirectory(dirname(displayPath), displayPath, options.parents);
      try {
        const entry = parent.child(basename(displayPath));
        try {
          await mkdir(entry, { mode: 0o777 });
        } catch (error) {
          if (errnoOf(error) !== 'EEXIST') throw error;
          const there = await this.#guard.take(entry, displayPath).catch(() => undefined);
          const isDirectory = there !== undefined && (await there.stat()).isDirectory();
          await there?.release();
          if (!isDirectory) throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: something that is not a directory is there`);
          if (!options.parents) throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: it already exists`);
          return { path: there.real, created: false };
        }
        return { path: `${parent.real === '/' ? '' : parent.real}/${basename(displayPath)}`, created: true };
      } finally {
        await parent.release();
      }
    } catch (error) {
      throw fromSystemError(error, doing);
    }
  }

  /** Removes the entry at `path` (a final link itself); a directory with entries only with `recursive`. */
  async remove(path: string, options: { cwd?: string | undefined; recursive: boolean }, signal?: AbortSignal): Promise<{ removed: boolean }> {
    const displayPath = absolutePath(path, options.cwd ?? this.#cwd);
    const doing = `remove "${displayPath}"`;
    checkAborted(signal, doing);
    if (dirname(displayPath) === displayPath) throw new FsFailure('FS_PERMISSION_DENIED', `cannot ${doing}: it is the filesystem's root`);
    let parent: Anchor;
    try {
      parent = await this.#guard.take(dirname(displayPath), displayPath, { directory: true });
    } catch (error) {
      if (isAbsence(error)) return { removed: false };
      throw fromSystemError(error, doing);
    }
    try {
      const entry = parent.child(basename(displayPath));
      const info = await lstat(entry, { bigint: true }).catch((error: unknown) => {
        if (isAbsence(error)) return undefined;
        throw error;
      });
      if (info === undefined) return { removed: false };
      this.#checkNotSecret(join(parent.real, basename(displayPath)), info, displayPath);
      if (!info.isDirectory()) await unlink(entry);
      else if (options.recursive) {
        // Following no link: the tree may be another user's, who can swap a directory for a link while it goes.
        const leftovers = await removeTree(entry);
        if (leftovers.length > 0)
          throw new FsFailure('FS_IO_ERROR', `cannot ${doing}: ${leftovers.length} entries stay, the first ${leftovers[0]!.path} (${leftovers[0]!.reason})`);
      } else {
        try {
          await rmdir(entry);
        } catch (error) {
          if (errnoOf(error) === 'ENOTEMPTY' || errnoOf(error) === 'EEXIST') throw new FsFailure('FS_NOT_EMPTY', `cannot ${doing}: the directory is not empty`);
          throw error;
        }
      }
      return { removed: true };
    } catch (error) {
      throw fromSystemError(error, doing);
    } finally {
      await parent.release();
    }
  }

  /** Moves the entry at `from` (a final link itself) to `to`, atomically; replaces nothing unless `overwrite`. */
  async rename(from: string, to: string, options: { cwd?: string | undefined; overwrite: boolean }, signal?: AbortSignal): Promise<{ path: string }> {
    const source = absolutePath(from, options.cwd ?? this.#cwd);
    const destination = absolutePath(to, options.cwd ?? this.#cwd);
    const doing = `rename "${source}" to "${destination}"`;
    checkAborted(signal, doing);
    if (dirname(source) === source || dirname(destination) === destination)
      throw new FsFailure('FS_PERMISSION_DENIED', `cannot ${doing}: the filesystem's root`);
    try {
      return await withAnchor(this.#guard.take(dirname(source), source, { directory: true }), (sourceParent) =>
        withAnchor(this.#guard.take(dirname(destination), destination, { directory: true }), async (destinationParent) => {
          const here = sourceParent.child(basename(source));
          const there = destinationParent.child(basename(destination));
          this.#checkNotSecret(join(sourceParent.real, basename(source)), await lstat(here, { bigint: true }), source);
          if (options.overwrite) await rename(here, there);
          else {
            const outcome = renameNoReplace(here, there);
            if (outcome === 'exists') throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: something is there and overwrite is false`);
            if (outcome === 'unsupported') {
              // Where the kernel cannot refuse in one step, the check and the rename are two.
              if ((await lstat(there).catch(() => undefined)) !== undefined)
                throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: something is there and overwrite is false`);
              await rename(here, there);
            }
          }
          return { path: destination };
        }),
      );
    } catch (error) {
      const errno = errnoOf(error);
      if (errno === 'ENOTEMPTY') throw new FsFailure('FS_NOT_EMPTY', `cannot ${doing}: the directory there is not empty`, { cause: error, errno });
      if (errno === 'EISDIR' || errno === 'EEXIST') throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: a directory is there`, { cause: error, errno });
      if (errno === 'EXDEV') throw new FsFailure('FS_IO_ERROR', `cannot ${doing}: the paths are on different filesystems`, { cause: error, errno });
      throw fromSystemError(error, doing);
    }
  }

  /** The size, SHA-256 and version of the regular file at `path`, read from one open file (again if it changed meanwhile). */
  async digest(path: string, options: { cwd?: string | undefined }, signal?: AbortSignal): Promise<FileDigest> {
    const displayPath = absolutePath(path, options.cwd ?? this.#cwd);
    const doing = `digest "${displayPath}"`;
    checkAborted(signal, doing);
    try {
      const anchor = await this.#guard.take(displayPath, displayPath);
      try {
        for (let attempt = 1; ; attempt += 1) {
          const handle = await open(anchor.via, 'r');
          try {
            const before = await handle.stat({ bigint: true });
            if (!before.isFile()) throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`);
            const stream = createReadStream('', { fd: handle, start: 0, autoClose: false, ...(signal === undefined ? {} : { signal }) });
            const sha256 = await hashOf(stream);
            const after = await handle.stat({ bigint: true });
            const version = versionOf(after);
            if (version === versionOf(before)) return { path: displayPath, size: Number(after.size), sha256, version };
            if (attempt === DIGEST_ATTEMPTS) throw new FsFailure('FS_IO_ERROR', `cannot ${doing}: it changed while it was read, ${attempt} times`);
          } finally {
            await handle.close();
          }
        }
      } finally {
        await anchor.release();
      }
    } catch (error) {
      throw fromSystemError(error, doing);
    }
  }

  /** Begins an upload to `path`, whose directory must exist; refused early when a file is there and `overwrite` is false. */
  async stageUpload(path: string, options: { cwd?: string | undefined; overwrite: boolean; mode?: number | undefined }): Promise<StagedUpload> {
    const displayPath = absolutePath(path, options.cwd ?? this.#cwd);
    const doing = `upload "${displayPath}"`;
    if (dirname(displayPath) === displayPath) throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`);
    let directory: Anchor;
    try {
      directory = await this.#guard.take(dirname(displayPath), displayPath, { directory: true });
    } catch (error) {
      throw fromSystemError(error, doing);
    }
    try {
      // The entry itself: a link there is replaced by the upload, never followed.
      const there = await lstat(directory.child(basename(displayPath))).catch((error: unknown) => {
        if (isAbsence(error)) return undefined;
        throw error;
      });
      if (there !== undefined && !there.isFile() && !there.isSymbolicLink()) throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`);
      if (there !== undefined && !options.overwrite) throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: a file is there and overwrite is false`);
      const { handle, ...stage } = await makeStage(directory, '.execworld-upload-');
      await handle.close();
      const held = await stage.anchor.stat();
      return new StagedUpload({
        identity: { directory: directory.real, name: stage.name, dev: String(held.dev), ino: String(held.ino) },
        path: displayPath,
        directory,
        name: basename(displayPath),
        stage,
        overwrite: options.overwrite,
        mode: options.mode,
        locks: this.#locks,
      });
    } catch (error) {
      await directory.release();
      throw fromSystemError(error, doing);
    }
  }

  /** The stage a previous image of the daemon handed over, on the descriptors its exec kept. */
  adoptUpload(record: UploadStageRecord): StagedUpload {
    const stageAnchor = anchorOfDescriptor(record.stage.fd, record.stage.real);
    return new StagedUpload({
      identity: record.identity,
      path: record.path,
      directory: this.#guard.adopt(record.directory.fd, record.directory.real),
      name: record.name,
      stage: { name: record.stage.name, anchor: stageAnchor, content: stageAnchor.child('content') },
      overwrite: record.overwrite,
      mode: record.mode,
      locks: this.#locks,
      adopted: true,
    });
  }

  /**
   * The directory at `path` as a tar stream (see {@link packArchive}): its
   * entries relative to it, links stored as links (never followed), modes and
   * empty directories kept, owners left out, special files left out and
   * listed. The directory stays held until the stream ends or is destroyed (a
   * reader that went away), which also closes the file it was reading.
   */
  async pack(path: string, options: { cwd?: string | undefined }, signal?: AbortSignal): Promise<PackedArchive> {
    const displayPath = absolutePath(path, options.cwd ?? this.#cwd);
    const doing = `pack "${displayPath}"`;
    checkAborted(signal, doing);
    let anchor: Anchor;
    try {
      anchor = await this.#guard.take(displayPath, displayPath, { directory: true });
    } catch (error) {
      if (errnoOf(error) === 'ENOTDIR') throw new FsFailure('FS_NOT_DIRECTORY', `cannot ${doing}: not a directory`, { cause: error });
      throw fromSystemError(error, doing);
    }
    // Walked from the anchor, each directory held: one swapped for a link meanwhile is not entered.
    let packed: PackedArchive;
    try {
      // The daemon's own files are left out, by their paths and (a hard link to one) by what they are.
      packed = await packArchive(anchor.via, { hide: (entry, info) => this.#guard.hides(join(anchor.real, entry), info) });
    } catch (error) {
      await anchor.release();
      throw fromSystemError(error, doing);
    }
    const inner = packed.stream;
    // A failure midway is the seam's (a directory replaced while it was packed: FS_IO_ERROR with its errno), as one before it would be.
    const stream = Readable.from(
      (async function* () {
        try {
          for await (const chunk of inner) yield chunk as Buffer;
        } catch (error) {
          throw fromSystemError(error, doing);
        }
      })(),
      { objectMode: false },
    );
    stream.once('close', () => {
      inner.destroy();
      void anchor.release();
    });
    if (signal !== undefined) {
      const stop = (): void => void stream.destroy();
      signal.addEventListener('abort', stop, { once: true });
      stream.once('close', () => signal.removeEventListener('abort', stop));
    }
    return { stream, skipped: packed.skipped };
  }

  /** Refuses to remove or move an entry that is, or holds, one of the daemon's secrets (by path, or a file by identity). */
  #checkNotSecret(real: string, info: { dev: bigint; ino: bigint }, displayPath: string): void {
    this.#guard.checkTree(real, displayPath);
    this.#guard.checkIdentity(info, displayPath);
  }

  /**
   * Unpacks the tar stream `body` into the directory at `path` (made when
   * missing), as {@link unpackArchive} does: entries that would leave it are
   * refused and listed, symbolic links are made last, each in a directory
   * held and checked against the root.
   */
  async unpack(path: string, options: { cwd?: string | undefined }, body: Readable, signal?: AbortSignal): Promise<Unpacked> {
    const displayPath = absolutePath(path, options.cwd ?? this.#cwd);
    const doing = `unpack into "${displayPath}"`;
    checkAborted(signal, doing);
    let anchor: Anchor;
    try {
      anchor = await this.#guard.takeDirectory(displayPath, displayPath, true);
    } catch (error) {
      body.resume();
      if (errnoOf(error) === 'ENOTDIR' || errnoOf(error) === 'EEXIST')
        throw new FsFailure('FS_NOT_DIRECTORY', `cannot ${doing}: not a directory`, { cause: error });
      throw fromSystemError(error, doing);
    }
    try {
      // Every entry is made through directories held from the anchor, following no link: it stays inside whatever anyone swaps meanwhile.
      const unpacked = await unpackArchive(body, anchor.via, {
        signal,
        modeBits: clientModeBits(),
        // The daemon's own files are neither written nor linked to, whatever the archive names.
        refuse: (entry, linkpath) =>
          [entry, linkpath].some((each) => each !== undefined && this.#guard.hides(join(anchor.real, each)))
            ? "the daemon's own: no owner reaches it"
            : undefined,
      });
      return { path: anchor.real, ...unpacked };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/TAR_BAD_ARCHIVE|invalid|unrecognized archive/i.test(message))
        throw new FsFailure('FS_IO_ERROR', `cannot ${doing}: the body is not a tar archive (${message})`, { cause: error });
      throw fromSystemError(error, doing);
    } finally {
      await anchor.release();
    }
  }
}
