/**
 * Files beyond the seam, for people and other frameworks: mkdir, remove,
 * rename, a remote file's digest, and files and directories copied both ways
 * between this machine and the daemon's world.
 *
 * - A file goes up as an upload: its bytes are sent in chunks to the
 *   upload's offset; a cut connection is resumed where the daemon says the
 *   bytes end, and the daemon publishes the file atomically only once its
 *   size and SHA-256 are the ones computed here.
 * - A file comes down from an offset: a cut is resumed from the bytes
 *   already written, refused if the file changed meanwhile, and the result is
 *   checked against the daemon's digest before it is moved into place.
 * - A directory goes either way as one tar stream (links kept as links,
 *   modes and empty directories kept); a cut fails it, to be run again.
 *   Special files (sockets, FIFOs, devices) have no bytes to copy: they are
 *   left out, and the result's warnings name them.
 *
 * Memory stays bounded on both sides whatever the size: every byte streams.
 * @module
 */
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, realpath, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ExecworldError, FileSystemError, invalidArgument, isExecworldError } from '../errors.ts';
import type { OperationResult } from '../protocol/operations.ts';
import type { RemoteRuntime } from '../remote/runtime.ts';
import { packArchive, parseSkippedTrailer, skippedWarnings, unpackArchive, type ArchiveResult } from './archive.ts';
import { ARCHIVE_PATH, CONTENT_PATH, DIGEST_TRAILER, SIZE_HEADER, SKIPPED_TRAILER, UPLOADS_PATH, VERSION_HEADER } from './routes.ts';

/** A file's size, SHA-256 and version (the daemon's version of the remote copy). */
export type FileDigest = OperationResult<'fs.digest'>;

export interface TransferProgress {
  /** Bytes of the file (or, for a directory, of the archive) moved so far. */
  readonly bytes: number;
  /** The file's size; undefined for a directory's archive. */
  readonly total: number | undefined;
}

export interface CopyOptions {
  /** Called as bytes move (at most every chunk of the stream). */
  readonly onProgress?: ((progress: TransferProgress) => void) | undefined;
  readonly signal?: AbortSignal | undefined;
}

export interface UploadOptions extends CopyOptions {
  /** Replace a file already at the remote path. @default true */
  readonly overwrite?: boolean | undefined;
  /** The remote file's permission bits; without it a replaced file keeps its own, a new one gets 0644. */
  readonly mode?: number | undefined;
}

export interface RemoteTransferOptions {
  /** The largest piece of an upload sent in one request. @default 64 MiB */
  readonly chunkBytes?: number;
  /** How many times in a row a cut transfer is resumed without progress before it fails. @default 5 */
  readonly retries?: number;
  /** The first wait before a resume, doubled after each failure in a row. @default 200 */
  readonly retryDelayMs?: number;
}

/** How much of a local file one read takes: large reads cost fewer turns of the event loop per byte sent. */
const READ_CHUNK_BYTES = 1024 * 1024;
/** What a stream of a transfer holds before it makes its source wait, so that the network and the disk overlap (fs's own is 16 KiB). */
const STREAM_BUFFER_BYTES = 4 * 1024 * 1024;

/** Whether `error` is the transport failing (a cut, a reset), which a resume can get past, rather than an answer. */
function isTransportFailure(error: unknown): boolean {
  if (isExecworldError(error)) return ['OUTCOME_UNKNOWN', 'CONNECTION_LOST', 'CONNECTION_FAILED', 'REQUEST_TIMEOUT', 'CLIENT_TIMEOUT'].includes(error.code);
  const code = (error as { code?: unknown } | null)?.code;
  if ((error as { name?: unknown } | null)?.name === 'AbortError') return false;
  return (
    typeof code === 'string' && /^(ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|ERR_STREAM_PREMATURE_CLOSE|UND_ERR_SOCKET|ECONNABORTED|EHOSTUNREACH)$/.test(code)
  );
}

/** Counts (and optionally hashes) the bytes passing through. */
function meter(onChunk: (chunk: Buffer) => void): Transform {
  return new Transform({
    highWaterMark: STREAM_BUFFER_BYTES,
    transform(chunk: Buffer, _encoding, done) {
      onChunk(chunk);
      done(null, chunk);
    },
  });
}

/** The SHA-256 state of a file's first `length` bytes, read from `path`. */
async function hashPrefix(path: string, length: number): Promise<Hash> {
  const hash = createHash('sha256');
  if (length === 0) return hash;
  for await (const chunk of createReadStream(path, { start: 0, end: length - 1 }) as AsyncIterable<Buffer>) hash.update(chunk);
  return hash;
}

export class RemoteTransfer {
  readonly runtime: RemoteRuntime;
  readonly #chunkBytes: number;
  readonly #retries: number;
  readonly #retryDelayMs: number;

  constructor(runtime: RemoteRuntime, options: RemoteTransferOptions = {}) {
    this.runtime = runtime;
    this.#chunkBytes = options.chunkBytes ?? 64 * 1024 * 1024;
    this.#retries = options.retries ?? 5;
    this.#retryDelayMs = options.retryDelayMs ?? 200;
    if (!Number.isSafeInteger(this.#chunkBytes) || this.#chunkBytes < 1)
      throw invalidArgument(`chunkBytes must be a positive integer, not ${options.chunkBytes}`);
    if (!Number.isSafeInteger(this.#retries) || this.#retries < 0) throw invalidArgument(`retries must be a non-negative integer, not ${options.retries}`);
  }

  mkdir(path: string, options: { parents?: boolean; cwd?: string } = {}): Promise<OperationResult<'fs.mkdir'>> {
    return this.runtime.call('fs.mkdir', { path, ...options });
  }

  remove(path: string, options: { recursive?: boolean; cwd?: string } = {}): Promise<OperationResult<'fs.remove'>> {
    return this.runtime.call('fs.remove', { path, ...options });
  }

  rename(from: string, to: string, options: { overwrite?: boolean; cwd?: string } = {}): Promise<OperationResult<'fs.rename'>> {
    return this.runtime.call('fs.rename', { from, to, ...options });
  }

  digest(path: string, options: { cwd?: string } = {}): Promise<FileDigest> {
    return this.runtime.call('fs.digest', { path, ...options });
  }

  /** Copies the local file `localPath` to `remotePath`; answers the published file's digest. */
  async uploadFile(localPath: string, remotePath: string, options: UploadOptions = {}): Promise<FileDigest> {
    const { signal } = options;
    const info = await stat(localPath);
    if (!info.isFile()) throw invalidArgument(`${localPath} is not a regular file`);
    const size = info.size;
    const upload = await this.runtime.call('upload.create', {
      path: remotePath,
      ...(options.overwrite === undefined ? {} : { overwrite: options.overwrite }),
      ...(options.mode === undefined ? {} : { mode: options.mode }),
    });
    const at = `${UPLOADS_PATH}/${upload.id}`;
    try {
      let offset = 0;
      /** The hash of the local file's first `hashed` bytes; -1 when a cut left it unknown. */
      let hash = createHash('sha256');
      let hashed = 0;
      let failures = 0;
      options.onProgress?.({ bytes: 0, total: size });
      while (offset < size || hashed !== size) {
        signal?.throwIfAborted();
        if (hashed !== offset) {
          hash = await hashPrefix(localPath, offset);
          hashed = offset;
        }
        if (offset === size) break;
        const end = Math.min(size, offset + this.#chunkBytes);
        let sent = offset;
        const body = createReadStream(localPath, { start: offset, end: end - 1, highWaterMark: READ_CHUNK_BYTES }).pipe(
          meter((chunk) => {
            hash.update(chunk);
            sent += chunk.length;
            options.onProgress?.({ bytes: sent, total: size });
          }),
        );
        try {
          const answer = await this.runtime.http.json<{ offset: number }>('PUT', at, { offset }, { body, signal });
          if (answer.offset !== end) throw new ExecworldError('INTERNAL', `the daemon took the upload to ${answer.offset} bytes, not ${end}`);
          offset = end;
          hashed = end;
          failures = 0;
        } catch (error) {
          body.destroy();
          if (!isTransportFailure(error) && !(isExecworldError(error) && error.code === 'UPLOAD_OFFSET_MISMATCH')) throw error;
          failures += 1;
          if (failures > this.#retries) throw error;
          await this.#pause(failures, signal);
          hashed = -1;
          const resumed = (await this.runtime.call('upload.get', { id: upload.id })).offset;
          // Progress since the last cut earns the resume a fresh count.
          if (resumed > offset) failures = 1;
          offset = resumed;
          options.onProgress?.({ bytes: offset, total: size });
        }
      }
      const sha256 = hash.digest('hex');
      try {
        return await this.runtime.call('upload.complete', { id: upload.id, size, sha256 });
      } catch (error) {
        // An answer lost to a cut: the file published is known by its digest.
        if (!isTransportFailure(error)) throw error;
        const published = await this.digest(remotePath);
        if (published.sha256 !== sha256 || published.size !== size) throw error;
        return published;
      }
    } catch (error) {
      await this.runtime.call('upload.delete', { id: upload.id }).catch(() => undefined);
      throw error;
    }
  }

  /** Copies the remote file `remotePath` to `localPath` (replacing it only once every byte arrived and was checked). */
  async downloadFile(remotePath: string, localPath: string, options: CopyOptions = {}): Promise<FileDigest> {
    const { signal } = options;
    const partial = join(dirname(localPath), `.${basename(localPath)}.execworld-${randomBytes(6).toString('hex')}`);
    const handle = await open(partial, 'wx', 0o600);
    await handle.close();
    try {
      let offset = 0;
      let version: string | undefined;
      let size: number | undefined;
      let hash = createHash('sha256');
      let hashed = 0;
      let failures = 0;
      /** The daemon's SHA-256 of the whole file, when one answer carried all of it. */
      let sent: string | undefined;
      for (;;) {
        signal?.throwIfAborted();
        if (hashed !== offset) {
          hash = await hashPrefix(partial, offset);
          hashed = offset;
        }
        try {
          // The first request asks for the digest in the answer's trailer: a whole file in one answer needs no second read.
          const digest = offset === 0 ? 'sha256' : undefined;
          const response = await this.runtime.http.get(CONTENT_PATH, { path: remotePath, offset, version, digest }, signal);
          const answered = response.headers[VERSION_HEADER];
          version ??= typeof answered === 'string' ? answered : undefined;
          size ??= Number(response.headers[SIZE_HEADER]);
          options.onProgress?.({ bytes: offset, total: size });
          let received = offset;
          await pipeline(
            response,
            meter((chunk) => {
              hash.update(chunk);
              received += chunk.length;
              options.onProgress?.({ bytes: received, total: size });
            }),
            createWriteStream(partial, { flags: 'r+', start: offset, highWaterMark: STREAM_BUFFER_BYTES }),
          );
          if (!response.complete) throw Object.assign(new Error('the answer ended early'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
          offset = received;
          hashed = received;
          const trailer = response.trailers[DIGEST_TRAILER];
          if (digest !== undefined && typeof trailer === 'string') sent = trailer;
          break;
        } catch (error) {
          if (!isTransportFailure(error)) throw error;
          failures += 1;
          if (failures > this.#retries) throw error;
          await this.#pause(failures, signal);
          const kept = (await stat(partial)).size;
          // Progress since the last cut earns the resume a fresh count.
          if (kept > offset) failures = 1;
          offset = kept;
          hashed = -1;
        }
      }
      const sha256 = hash.digest('hex');
      // The bytes of one open file at one version: its digest, from the trailer or (after a cut, or for an empty file) asked for.
      const remote = sent !== undefined && version !== undefined ? { path: remotePath, size: offset, sha256: sent, version } : await this.digest(remotePath);
      if (remote.version !== version) throw new FileSystemError('FS_STALE_VERSION', `${remotePath} changed while it was downloaded`);
      if (remote.sha256 !== sha256 || remote.size !== offset) {
        throw new FileSystemError(
          'FS_CHECKSUM_MISMATCH',
          `the copy of ${remotePath} has SHA-256 ${sha256} (${offset} bytes), the daemon's ${remote.sha256} (${remote.size})`,
        );
      }
      await rename(partial, localPath);
      return remote;
    } catch (error) {
      await rm(partial, { force: true }).catch(() => undefined);
      throw error;
    }
  }

  /**
   * Copies the local directory `localDir` (its contents) into `remoteDir`,
   * made when missing; the special files left out are among the warnings.
   */
  async uploadDirectory(localDir: string, remoteDir: string, options: CopyOptions = {}): Promise<ArchiveResult & { readonly path: string }> {
    const info = await stat(localDir);
    if (!info.isDirectory()) throw invalidArgument(`${localDir} is not a directory`);
    let bytes = 0;
    const packed = await packArchive(localDir);
    const body = packed.stream.pipe(
      meter((chunk) => {
        bytes += chunk.length;
        options.onProgress?.({ bytes, total: undefined });
      }),
    );
    packed.stream.once('error', (error) => body.destroy(error));
    try {
      const unpacked = await this.runtime.http.json<ArchiveResult & { path: string }>(
        'PUT',
        ARCHIVE_PATH,
        { path: remoteDir },
        { body, contentType: 'application/x-tar', signal: options.signal },
      );
      return { ...unpacked, warnings: [...skippedWarnings(packed.skipped), ...unpacked.warnings] };
    } finally {
      // A request that failed early leaves the pack unread: its open file is closed.
      packed.stream.destroy();
    }
  }

  /**
   * Copies the remote directory `remoteDir` (its contents) into `localDir`,
   * made when missing; the special files the daemon left out are among the
   * warnings.
   */
  async downloadDirectory(remoteDir: string, localDir: string, options: CopyOptions = {}): Promise<ArchiveResult> {
    await mkdir(localDir, { recursive: true });
    const root = await realpath(localDir);
    const response = await this.runtime.http.get(ARCHIVE_PATH, { path: remoteDir }, options.signal);
    let bytes = 0;
    const counted = response.pipe(
      meter((chunk) => {
        bytes += chunk.length;
        options.onProgress?.({ bytes, total: undefined });
      }),
    );
    response.once('error', (error) => counted.destroy(error));
    const result = await unpackArchive(counted, root);
    if (!response.complete) throw new FileSystemError('FS_IO_ERROR', `the archive of ${remoteDir} ended early`);
    const skipped = parseSkippedTrailer(response.trailers[SKIPPED_TRAILER]);
    return skipped === undefined ? result : { ...result, warnings: [...skippedWarnings(skipped), ...result.warnings] };
  }

  async #pause(failures: number, signal: AbortSignal | undefined): Promise<void> {
    const delay = Math.min(this.#retryDelayMs * 2 ** (failures - 1), 10_000);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, delay);
      signal?.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
        },
        { once: true },
      );
    });
  }
}
