/**
 * The bounded, byte-exact tail of a stream, addressed by whole-stream byte
 * offsets: the in-memory half of the seam's collect mode. The local provider
 * keeps one per collected stream; the remote runtime keeps a replica of the
 * daemon's.
 * @module
 */
import type { SubprocessOutputRead } from './types.ts';

export class ByteTail {
  readonly maxBytes: number;
  #chunks: Uint8Array[] = [];
  /** Bytes retained. */
  #bytes = 0;
  /** Bytes ever seen, retained or not. */
  #total = 0;
  #dropped = false;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** Bytes ever seen: the offset of the next byte. */
  get totalBytes(): number {
    return this.#total;
  }

  /** Bytes retained. */
  get retainedBytes(): number {
    return this.#bytes;
  }

  /** The oldest retained offset. */
  get windowStart(): number {
    return this.#total - this.#bytes;
  }

  /** True once bytes were dropped from the head. */
  get truncated(): boolean {
    return this.#dropped;
  }

  /** The retained chunks, oldest first; shared, not copied. */
  get chunks(): readonly Uint8Array[] {
    return this.#chunks;
  }

  /** Appends a chunk and trims the head so exactly the last `maxBytes` stay. */
  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#total += chunk.length;
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    while (this.#bytes > this.maxBytes) {
      this.#dropped = true;
      const head = this.#chunks[0]!;
      const excess = this.#bytes - this.maxBytes;
      if (head.length <= excess) {
        this.#chunks.shift();
        this.#bytes -= head.length;
      } else {
        this.#chunks[0] = head.subarray(excess);
        this.#bytes -= excess;
      }
    }
  }

  /**
   * Records bytes that were produced but never seen here (a replica that fell
   * behind): the offsets advance, and everything before is gone.
   */
  skipTo(offset: number): void {
    if (offset <= this.#total) return;
    this.#chunks = [];
    this.#bytes = 0;
    this.#total = offset;
    this.#dropped = true;
  }

  /** Retained bytes from `fromByte` (or the window start, when older), at most `maxBytes` of them. */
  slice(fromByte: number, maxBytes = Number.POSITIVE_INFINITY): { from: number; chunks: Uint8Array[] } {
    let offset = this.windowStart;
    const from = Math.max(fromByte, offset);
    const chunks: Uint8Array[] = [];
    let taken = 0;
    for (const chunk of this.#chunks) {
      const chunkEnd = offset + chunk.length;
      if (chunkEnd > from && taken < maxBytes) {
        const skip = Math.max(0, from - offset);
        const piece = chunk.subarray(skip, skip + Math.min(chunk.length, maxBytes - taken));
        chunks.push(piece);
        taken += piece.length;
      }
      offset = chunkEnd;
    }
    return { from, chunks };
  }

  /**
   * The seam's offset read: the text from `fromByte`, or the whole retained tail
   * when `fromByte` is older than it (`lossy`). Decoded per read, so a character
   * cut at the offset turns into U+FFFD.
   * @throws {RangeError} when `fromByte` is not a non-negative integer.
   */
  readFrom(fromByte: number, spillPath?: string): SubprocessOutputRead {
    if (!Number.isSafeInteger(fromByte) || fromByte < 0) {
      throw new RangeError(`readFrom expects a non-negative integer byte offset, got ${String(fromByte)}`);
    }
    const lossy = fromByte < this.windowStart;
    const { chunks } = this.slice(lossy ? this.windowStart : Math.min(fromByte, this.#total));
    const text = decoder.decode(concat(chunks));
    return { text, nextOffset: this.#total, lossy, ...(spillPath !== undefined ? { spillPath } : {}) };
  }
}

const decoder = new TextDecoder('utf-8', { fatal: false });

/**
 * `chunks` as one array: the one chunk itself when there is only one, not a
 * copy, unless `own` asks for an array of its own (a chunk may be a view of a
 * larger buffer, whose other bytes the caller must not hand on).
 */
export function concat(chunks: readonly Uint8Array[], own = false): Uint8Array {
  if (chunks.length === 1 && !own) return chunks[0]!;
  const length = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
  const joined = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  return joined;
}
