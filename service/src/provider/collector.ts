/**
 * Bounded collection of one output stream: a byte-exact in-memory tail and an
 * optional spill file holding the whole stream while it stays under its cap.
 * @module
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, fchownSync, mkdtempSync, openSync, readdirSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeTree } from './fs/remove-tree.ts';
import { ByteTail, type SubprocessCollect, type SubprocessOutputRead, type SubprocessOutputReader } from '@execworld/sdk/seam';

/** File-system calls of the spill file; injectable so tests can make them fail. */
export interface SpillFileSystem {
  open(path: string): number;
  write(fd: number, chunk: Uint8Array): void;
  close(fd: number): void;
  unlink(path: string): void;
}

const hostFileSystem: SpillFileSystem = {
  // Exclusive create: never follows or reuses an existing path, symlink or not.
  open: (path) => openSync(path, 'wx', 0o600),
  write(fd, chunk) {
    let offset = 0;
    while (offset < chunk.length) offset += writeSync(fd, chunk, offset);
  },
  close: (fd) => closeSync(fd),
  unlink: (path) => unlinkSync(path),
};

/**
 * Where spill files go: one private (0700) directory, made on first use in the
 * OS temp dir (or `parent`) and named `execworld-<hostPid>-<random>`. Files are
 * named `execworld-<hostPid>-<n>-<12 hex>-<stream>.log` and created 0600.
 * The spill files of processes run as another user are that user's (owned by
 * it, 0600), in a directory of this process's that the user may traverse but
 * not list or change (0711): the user reads its files by their paths and can
 * neither add, rename nor link anything there, so nothing it does can lead
 * this process's writes, or its removal of the directory, anywhere else.
 * Spill files are the caller's: the seam never deletes them; the daemon
 * discards them with their session (see {@link OutputCollector.discard}) and
 * sweeps directories a dead daemon left (see {@link sweepStaleSpillDirectories}).
 */
export class SpillDirectory {
  readonly fs: SpillFileSystem;
  readonly #parent: string;
  readonly #owner: { uid: number; gid: number } | undefined;
  #path: string | undefined;
  #counter = 0;

  /**
   * @param options.owner - the user whose spill files these are: the files are
   *   theirs (0600), so only they (and root) read them; the directory stays
   *   this process's (0711).
   */
  constructor(options: { parent?: string; fs?: SpillFileSystem; owner?: { uid: number; gid: number } } = {}) {
    this.#parent = options.parent ?? tmpdir();
    this.#owner = options.owner;
    const fs = options.fs ?? hostFileSystem;
    const owner = options.owner;
    this.fs =
      owner === undefined
        ? fs
        : {
            ...fs,
            open: (path) => {
              const fd = fs.open(path);
              fchownSync(fd, owner.uid, owner.gid);
              return fd;
            },
          };
  }

  /** A fresh file path for one stream; makes the directory on first use. */
  nextPath(stream: 'stdout' | 'stderr'): string {
    if (this.#path === undefined) {
      const path = mkdtempSync(join(this.#parent, `execworld-${process.pid}-`));
      if (this.#owner !== undefined) chmodSync(path, 0o711);
      this.#path = path;
    }
    this.#counter += 1;
    const name = `execworld-${process.pid}-${this.#counter}-${randomBytes(6).toString('hex')}-${stream}.log`;
    return join(this.#path, name);
  }
}

/**
 * Removes the spill directories under `parent` whose host process is gone (a
 * daemon that crashed or was killed): named `execworld-<pid>-…`, with no live
 * process of that pid. Runs once the dead daemon's sessions were ended, and
 * follows no link (see remove-tree.ts): a directory left by an older daemon
 * may be a user's. Returns the directories removed.
 */
export async function sweepStaleSpillDirectories(parent: string, isAlive: (pid: number) => boolean): Promise<string[]> {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch (_error) {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const pid = /^execworld-(\d+)-[A-Za-z0-9]{6}$/.exec(name)?.[1];
    if (pid === undefined || isAlive(Number(pid))) continue;
    // What cannot go (another daemon's, or not ours to remove) is left alone.
    if ((await removeTree(join(parent, name))).length === 0) removed.push(join(parent, name));
  }
  return removed;
}

interface Spill {
  readonly path: string;
  fd: number | undefined;
}

export class OutputCollector implements SubprocessOutputReader {
  readonly #tail: ByteTail;
  readonly #spillMaxBytes: number | undefined;
  readonly #directory: SpillDirectory;
  readonly #stream: 'stdout' | 'stderr';
  #spill: Spill | undefined;
  /** Spilling was given up for this stream (too long, or the file failed). */
  #spillOff = false;

  constructor(collect: SubprocessCollect, directory: SpillDirectory, stream: 'stdout' | 'stderr') {
    this.#tail = new ByteTail(collect.maxBytes);
    this.#spillMaxBytes = collect.spill?.maxBytes;
    this.#directory = directory;
    this.#stream = stream;
  }

  get totalBytes(): number {
    return this.#tail.totalBytes;
  }

  /** True when bytes were dropped from the head of the tail. */
  get truncated(): boolean {
    return this.#tail.truncated;
  }

  /** The oldest retained offset. */
  get windowStart(): number {
    return this.#tail.windowStart;
  }

  /** The spill file while it exists and holds the whole stream. */
  get spillPath(): string | undefined {
    return this.#spill?.path;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    const overflows = this.#tail.retainedBytes + chunk.length > this.#tail.maxBytes;
    if (this.#spillMaxBytes !== undefined && !this.#spillOff && (this.#spill !== undefined || overflows)) {
      this.#spillChunk(chunk, this.#tail.totalBytes + chunk.length);
    }
    this.#tail.push(chunk);
  }

  /** Retained bytes from `fromByte` (or the window start, when older); chunks are shared, not copied. */
  slice(fromByte: number, maxBytes: number): { from: number; chunks: Buffer[] } {
    const { from, chunks } = this.#tail.slice(fromByte, maxBytes);
    return { from, chunks: chunks.map((chunk) => Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)) };
  }

  readFrom(fromByte: number): SubprocessOutputRead {
    return this.#tail.readFrom(fromByte, this.spillPath);
  }

  /**
   * Closes the spill file once the stream is complete. A close that fails
   * (delayed write-back) leaves the file's completeness unknown, so its path is
   * withheld from then on; the in-memory tail stays readable.
   */
  seal(): void {
    const spill = this.#spill;
    if (spill?.fd === undefined) return;
    try {
      this.#directory.fs.close(spill.fd);
      spill.fd = undefined;
    } catch (_error) {
      this.#spill = undefined;
      this.#spillOff = true;
    }
  }

  /**
   * Closes and removes the spill file, for an owner that is done with the
   * stream (the daemon, when it forgets the session). The tail stays readable.
   */
  discard(): void {
    this.#discardSpill();
  }

  /** @param total - the stream's length once `chunk` is in. */
  #spillChunk(chunk: Buffer, total: number): void {
    if (total > this.#spillMaxBytes!) {
      this.#discardSpill();
      return;
    }
    try {
      if (this.#spill === undefined) {
        // Nothing was dropped yet, so the retained chunks are the whole prefix.
        const path = this.#directory.nextPath(this.#stream);
        this.#spill = { path, fd: this.#directory.fs.open(path) };
        for (const retained of this.#tail.chunks) this.#directory.fs.write(this.#spill.fd!, retained);
      }
      this.#directory.fs.write(this.#spill.fd!, chunk);
    } catch (_error) {
      // A spill that cannot be written is no longer the whole stream.
      this.#discardSpill();
    }
  }

  #discardSpill(): void {
    this.#spillOff = true;
    const spill = this.#spill;
    this.#spill = undefined;
    if (spill === undefined) return;
    try {
      if (spill.fd !== undefined) this.#directory.fs.close(spill.fd);
    } catch (_error) {
      // The descriptor is lost either way; the file is unlinked below.
    }
    try {
      this.#directory.fs.unlink(spill.path);
    } catch (_error) {
      // At most a capped, unadvertised file is left behind.
    }
  }
}
