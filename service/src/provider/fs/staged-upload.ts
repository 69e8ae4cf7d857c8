/**
 * The bytes of one upload, from its first append to its publication: staged
 * in a private directory beside the target, their SHA-256 kept as they are
 * written, flushed to disk as each request ends, checked and published
 * atomically under the target's write turn.
 * @module
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, chown, lstat, open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Anchor } from './anchor.ts';
import { isAbsence, versionOf } from './facts.ts';
import { FsFailure, fromSystemError } from './fs-error.ts';
import type { FileDigest, StageIdentity, UploadStage, UploadStageRecord } from '../api.ts';
import { place, removeStage, type Stage } from './staging.ts';
import type { MutationLocks } from './mutation-locks.ts';

/**
 * What a stream of an upload holds before it tells the socket to wait: with
 * fs's 16 KiB the socket would stop at each chunk until the disk took it;
 * with a few MiB receiving and writing overlap.
 */
const STREAM_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * The bytes of one upload, staged in a private directory beside the target
 * (0700, the file 0600) until they are published by rename (or by link, when
 * nothing may be replaced).
 */
export class StagedUpload implements UploadStage {
  /** The target's absolute path, as asked for. */
  readonly path: string;
  readonly identity: StageIdentity;
  readonly #directory: Anchor;
  readonly #name: string;
  readonly #stage: Stage;
  readonly #overwrite: boolean;
  readonly #mode: number | undefined;
  readonly #locks: MutationLocks;
  #discarded = false;
  /**
   * The SHA-256 of the staged bytes so far, kept as they are written so that
   * completing needs no second read; undefined once a cut left the file and
   * the hash apart (completing then reads the file).
   */
  #hash: Hash | undefined = createHash('sha256');
  #hashed = 0;
  /** The flush to disk of what earlier appends wrote, started as each ended, so that completing waits for little. */
  #flushing: Promise<void> = Promise.resolve();

  constructor(options: {
    path: string;
    identity: StageIdentity;
    directory: Anchor;
    name: string;
    stage: Stage;
    overwrite: boolean;
    mode: number | undefined;
    locks: MutationLocks;
    /** Adopted in a takeover: the running hash is gone with the previous image, so completing reads the file. */
    adopted?: boolean;
  }) {
    this.path = options.path;
    this.identity = options.identity;
    this.#directory = options.directory;
    this.#name = options.name;
    this.#stage = options.stage;
    this.#overwrite = options.overwrite;
    this.#mode = options.mode;
    this.#locks = options.locks;
    if (options.adopted === true) this.#hash = undefined;
  }

  handOver(): UploadStageRecord | undefined {
    const directory = this.#directory.fd;
    const stage = this.#stage.anchor.fd;
    if (this.#discarded || directory === undefined || stage === undefined) return undefined;
    return {
      path: this.path,
      identity: this.identity,
      directory: { fd: directory, real: this.#directory.real },
      name: this.#name,
      stage: { name: this.#stage.name, fd: stage, real: this.#stage.anchor.real },
      overwrite: this.#overwrite,
      ...(this.#mode === undefined ? {} : { mode: this.#mode }),
    };
  }

  get #content(): string {
    return this.#stage.content;
  }

  /** The bytes received so far. */
  async offset(): Promise<number> {
    this.#check();
    try {
      return (await stat(this.#content)).size;
    } catch (error) {
      throw fromSystemError(error, `upload "${this.path}"`);
    }
  }

  /**
   * Appends `body` at `offset`, which must be the bytes received so far. What
   * arrived before a cut stays: the next append starts at the new offset.
   */
  async append(offset: number, body: Readable, signal: AbortSignal | undefined): Promise<number> {
    const at = await this.offset();
    if (offset !== at) {
      body.resume();
      throw new FsFailure('UPLOAD_OFFSET_MISMATCH', `the upload of "${this.path}" has ${at} bytes; bytes for offset ${offset} were sent`);
    }
    const hash = this.#hashed === offset ? this.#hash : undefined;
    let passed = offset;
    const hashing = new Transform({
      highWaterMark: STREAM_BUFFER_BYTES,
      transform(chunk: Buffer, _encoding, done) {
        hash?.update(chunk);
        passed += chunk.length;
        done(null, chunk);
      },
    });
    try {
      await pipeline(
        body,
        hashing,
        createWriteStream(this.#content, { flags: 'r+', start: offset, highWaterMark: STREAM_BUFFER_BYTES }),
        signal === undefined ? {} : { signal },
      );
    } catch (error) {
      // The bytes that arrived are kept; the sender resumes from the offset it reads back.
      if (signal?.aborted !== true && (error as { code?: unknown }).code !== 'ERR_STREAM_PREMATURE_CLOSE')
        throw fromSystemError(error, `upload "${this.path}"`);
    }
    const size = await this.offset();
    this.#flushing = this.#flushing.then(() => flush(this.#content)).catch(() => undefined);
    // Bytes hashed but never written (a cut while they were queued) leave the running hash behind the file.
    if (hash !== undefined && size === passed) this.#hashed = size;
    else this.#hash = undefined;
    return size;
  }

  /** Checks the bytes against `expected`, then publishes them at the path: one step, under the target's write turn. */
  async complete(expected: { size?: number | undefined; sha256?: string | undefined }): Promise<FileDigest> {
    this.#check();
    const doing = `publish "${this.path}"`;
    let size: number;
    let sha256: string;
    try {
      await this.#flushing;
      const handle = await open(this.#content, 'r');
      try {
        await handle.sync();
        size = (await handle.stat()).size;
        sha256 =
          this.#hash !== undefined && this.#hashed === size
            ? this.#hash.copy().digest('hex')
            : await hashOf(createReadStream('', { fd: handle, start: 0, autoClose: false }));
      } finally {
        await handle.close();
      }
    } catch (error) {
      throw fromSystemError(error, doing);
    }
    if (expected.size !== undefined && expected.size !== size) {
      throw new FsFailure('FS_CHECKSUM_MISMATCH', `the upload of "${this.path}" has ${size} bytes, not the ${expected.size} said`);
    }
    if (expected.sha256 !== undefined && expected.sha256 !== sha256) {
      throw new FsFailure('FS_CHECKSUM_MISMATCH', `the upload of "${this.path}" has SHA-256 ${sha256}, not ${expected.sha256}`);
    }
    const destination = this.#directory.child(this.#name);
    // The same key the seam's writes of this path take their turn under: its real path.
    const digest = await this.#locks.exclusive(join(this.#directory.real, this.#name), async () => {
      try {
        // The entry itself, never what a link there leads to: the upload replaces the link, and takes nothing from its target.
        const there = await lstat(destination, { bigint: true }).catch((error: unknown) => {
          if (isAbsence(error)) return undefined;
          throw error;
        });
        if (there !== undefined && !there.isFile() && !there.isSymbolicLink())
          throw new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`);
        if (there !== undefined && !this.#overwrite) throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: a file is there and overwrite is false`);
        const prior = there?.isFile() === true ? there : undefined;
        // A replaced file lends its permission bits but never setuid, setgid or sticky; a mode the client asks for takes none of them from a daemon that is root.
        const mode = this.#mode === undefined ? (prior === undefined ? 0o644 : Number(prior.mode & 0o777n)) : this.#mode & clientModeBits();
        if (prior !== undefined && process.getuid?.() === 0) await chown(this.#content, Number(prior.uid), Number(prior.gid));
        await chmod(this.#content, mode);
        if (!(await place(this.#content, destination, this.#overwrite))) {
          throw new FsFailure('FS_ALREADY_EXISTS', `cannot ${doing}: a file is there and overwrite is false`);
        }
        const published = await stat(destination, { bigint: true });
        return { path: this.path, size, sha256, version: versionOf(published) };
      } catch (error) {
        throw fromSystemError(error, doing);
      }
    });
    // Refused, the staged bytes stay for a resume or a delete; published, they are done with.
    await this.discard();
    return digest;
  }

  /** Removes the staged bytes; the upload is over. */
  async discard(): Promise<void> {
    if (this.#discarded) return;
    this.#discarded = true;
    await removeStage(this.#stage, this.#directory);
    await this.#directory.release();
  }

  #check(): void {
    if (this.#discarded) throw new FsFailure('FS_NOT_FOUND', `the upload of "${this.path}" is over`);
  }
}

/** The permission bits a client may ask for: as root, none of setuid, setgid and sticky. */
export function clientModeBits(): number {
  return process.geteuid?.() === 0 ? 0o777 : 0o7777;
}

/** The SHA-256 of everything `stream` gives, in lowercase hex. */
export async function hashOf(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream as AsyncIterable<Buffer>) hash.update(chunk);
  return hash.digest('hex');
}

/** Writes the file's data at `path` to disk (what a later sync then finds already done). */
async function flush(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.datasync();
  } finally {
    await handle.close();
  }
}
