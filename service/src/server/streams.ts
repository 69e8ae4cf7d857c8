/**
 * Output streams addressed by absolute byte offsets, the one mechanism behind
 * every way output leaves the daemon: REST reads, long polls and WebSocket
 * subscriptions.
 *
 * A {@link RingStream} (terminal output, piped stdout/stderr) never drops a
 * byte nobody has read: once it holds `capacity` unread bytes it reports
 * `full`, its owner stops reading the source, and the child blocks. Bytes that
 * were read stay for replay until newer bytes need the room.
 *
 * A {@link CollectorStream} (collected stdout/stderr) is a view of the
 * provider's bounded tail: it never blocks the child and reports the head it
 * dropped as a gap, as collect mode promises.
 * @module
 */
import type { Readable } from 'node:stream';
import type { Access } from '@execworld/sdk/protocol';
import type { CollectedStreamView } from '../provider/api.ts';

export interface StreamSlice {
  /** Offset of the first byte of `data`. */
  readonly from: number;
  readonly data: Buffer;
  /** Offset after the last byte of `data`. */
  readonly next: number;
  /** The requested bytes [from, to) that are no longer retained. */
  readonly gap: { from: number; to: number } | null;
}

export interface ByteStream {
  /** Oldest retained offset. */
  readonly start: number;
  /** Offset of the next byte to come: the bytes produced so far. */
  readonly end: number;
  readonly ended: boolean;
  /** Set on a stream that ended cut off rather than closed (a port forward's connection reset in the world). */
  readonly reset?: boolean;
  /** Up to `maxBytes` retained bytes from `from`. */
  read(from: number, maxBytes: number): StreamSlice;
  /** A reader has every byte before `offset`; a blocking stream may free room. */
  consumed(offset: number): void;
  /** Calls `listener` after bytes are appended, room is freed, or the stream ends. */
  onChange(listener: () => void): () => void;
}

/**
 * Whether a caller's reads and acks may tell a stream its bytes were taken
 * (`consumed`), freeing room. A read-only token's may not: a watcher never
 * lets a program run on past what the owner's own readers have, so it cannot
 * make them miss output.
 */
export function readsFreeRoom(access: Access): boolean {
  return access === 'write';
}

/** An error for a read past the end of a stream. */
export class OffsetOutOfRangeError extends RangeError {
  override name = 'OffsetOutOfRangeError';
  constructor(from: number, end: number) {
    super(`offset ${from} is past the end of the stream (${end})`);
  }
}

abstract class ListenedStream {
  readonly #listeners = new Set<() => void>();

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  protected notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}

function gather(chunks: readonly Buffer[]): Buffer {
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

export class RingStream extends ListenedStream implements ByteStream {
  readonly capacity: number;
  /** Retained chunks from index `#head` on, and the offset of each one's first byte. */
  #chunks: Buffer[] = [];
  #starts: number[] = [];
  #head = 0;
  #start = 0;
  #end = 0;
  #consumed = 0;
  /** The offset an internal reader (a terminal's screen) still needs every byte from; see holdFrom. */
  #held = Number.POSITIVE_INFINITY;
  #ended = false;

  /** Told what the ring takes in and drops, and when its source is paused. */
  readonly meter: StreamMeter | undefined;

  constructor(capacity: number, meter?: StreamMeter) {
    super();
    this.capacity = capacity;
    this.meter = meter;
  }

  get start(): number {
    return this.#start;
  }
  get end(): number {
    return this.#end;
  }
  get ended(): boolean {
    return this.#ended;
  }
  /** The offset readers have read up to: bytes before it may be dropped. */
  get consumedTo(): number {
    return this.#consumed;
  }
  /** Bytes appended that no reader has yet. */
  get unread(): number {
    return this.#end - Math.max(this.#start, this.#consumed);
  }
  /** The source must stop until a reader frees room. */
  get full(): boolean {
    return this.unread >= this.capacity || this.#end - this.#held >= this.capacity;
  }
  /** Bytes held in memory. */
  get retained(): number {
    return this.#end - this.#start;
  }

  /**
   * Makes an empty ring hold `data` as the bytes from offset `start` on, as
   * the previous image of the daemon held them before a takeover, so that a
   * reader resuming from any retained offset reads on exactly. `consumed`:
   * the offset readers had read up to (see {@link consumedTo}).
   */
  restore(start: number, data: Buffer, consumed: number): void {
    if (this.#end !== 0 || this.#ended) throw new Error('only an empty ring is restored');
    this.#start = start;
    this.#end = start;
    this.#consumed = Math.min(Math.max(consumed, start), start + data.length);
    if (data.length > 0) {
      this.#chunks.push(data);
      this.#starts.push(start);
      this.#end += data.length;
    }
  }

  append(chunk: Buffer): void {
    if (this.#ended || chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#starts.push(this.#end);
    this.#end += chunk.length;
    this.meter?.appended(chunk.length);
    this.#evict();
    this.notify();
  }

  finish(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.notify();
  }

  consumed(offset: number): void {
    const next = Math.min(offset, this.#end);
    if (next <= this.#consumed) return;
    this.#consumed = next;
    this.#evict();
    this.notify();
  }

  /**
   * An internal reader (a terminal's screen) needs every byte from `offset` on
   * (undefined: no longer): they are not dropped, and once `capacity` of them
   * wait the stream is `full` and its source stops, as for unread bytes.
   * Unlike `consumed`, it may move back, and it says nothing of other readers.
   */
  holdFrom(offset: number | undefined): void {
    const wasFull = this.full;
    this.#held = offset ?? Number.POSITIVE_INFINITY;
    this.#evict();
    if (wasFull && !this.full) this.notify();
  }

  read(from: number, maxBytes: number): StreamSlice {
    if (from > this.#end) throw new OffsetOutOfRangeError(from, this.#end);
    const gap = from < this.#start ? { from, to: this.#start } : null;
    const begin = Math.max(from, this.#start);
    const pieces: Buffer[] = [];
    let taken = 0;
    for (let index = this.#chunkAt(begin); index < this.#chunks.length && taken < maxBytes; index += 1) {
      const chunk = this.#chunks[index]!;
      // Chunks are never trimmed: a partly dropped head still holds its first bytes, and begin >= #start skips them.
      const skip = Math.max(0, begin - this.#starts[index]!);
      const piece = chunk.subarray(skip, skip + maxBytes - taken);
      pieces.push(piece);
      taken += piece.length;
    }
    return { from: begin, data: gather(pieces), next: begin + taken, gap };
  }

  /** Index of the retained chunk holding `offset` (the chunk count when it is the end). */
  #chunkAt(offset: number): number {
    // Readers mostly follow the end: binary search over the retained chunks.
    let low = this.#head;
    let high = this.#chunks.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#starts[middle]! + this.#chunks[middle]!.length <= offset) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** Drops read bytes from the head while more than `capacity` is held. */
  #evict(): void {
    const read = Math.min(this.#consumed, this.#held);
    while (this.#end - this.#start > this.capacity && this.#start < read) {
      const head = this.#chunks[this.#head]!;
      const headStart = this.#start;
      const headEnd = this.#starts[this.#head]! + head.length;
      const droppable = Math.min(headEnd - headStart, read - this.#start, this.#end - this.#start - this.capacity);
      this.#start += droppable;
      this.meter?.evicted(droppable);
      if (this.#start === headEnd) {
        this.#chunks[this.#head] = EMPTY;
        this.#head += 1;
      }
    }
    // Compact once the dropped slots outnumber the retained ones, so both arrays stay proportional to what is held.
    if (this.#head > 64 && this.#head * 2 > this.#chunks.length) {
      this.#chunks = this.#chunks.slice(this.#head);
      this.#starts = this.#starts.slice(this.#head);
      this.#head = 0;
    }
  }
}

const EMPTY = Buffer.alloc(0);

/** What a ring tells the daemon's metrics. */
export interface StreamMeter {
  /** `bytes` of a program's output went into a ring. */
  appended(bytes: number): void;
  /** `bytes` every reader had were dropped from a ring's head. */
  evicted(bytes: number): void;
  /** A program was paused: its ring was full of bytes no reader took. */
  paused(): void;
}

/**
 * Pumps a readable (a terminal's output, a piped stdout) into a ring, pausing
 * it while the ring holds `capacity` unread bytes: the program then blocks on
 * its next write instead of the daemon buffering without bound. `observe`
 * sees each chunk once it is in the ring, with the offset of its first byte.
 */
export function feedRing(source: Readable, ring: RingStream, observe?: (chunk: Buffer, offset: number) => void): void {
  source.on('data', (chunk: Buffer) => {
    const offset = ring.end;
    ring.append(chunk);
    observe?.(chunk, offset);
    if (ring.full && !source.isPaused()) {
      source.pause();
      ring.meter?.paused();
    }
  });
  ring.onChange(() => {
    if (!ring.full && source.isPaused() && !ring.ended) source.resume();
  });
  source.once('end', () => ring.finish());
  source.once('close', () => ring.finish());
  source.on('error', () => ring.finish());
}

/** A view of a collected stream: the provider's bounded tail, fed live through `push`. */
export class CollectorStream extends ListenedStream implements ByteStream {
  readonly #collector: CollectedStreamView;
  #ended = false;

  constructor(collector: CollectedStreamView) {
    super();
    this.#collector = collector;
  }

  get start(): number {
    return this.#collector.windowStart;
  }
  get end(): number {
    return this.#collector.totalBytes;
  }
  get ended(): boolean {
    return this.#ended;
  }

  /** Called after the collector took a chunk. */
  appended(): void {
    this.notify();
  }

  finish(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.notify();
  }

  consumed(): void {
    // Collection never waits for readers.
  }

  read(from: number, maxBytes: number): StreamSlice {
    const end = this.end;
    if (from > end) throw new OffsetOutOfRangeError(from, end);
    const { from: begin, chunks } = this.#collector.slice(from, maxBytes);
    const data = gather(chunks);
    return { from: begin, data, next: begin + data.length, gap: from < begin ? { from, to: begin } : null };
  }
}

/**
 * Resolves once `stream` has bytes at or after `from`, has ended, or `ms`
 * passed, or `signal` aborted.
 */
export function waitForBytes(stream: ByteStream, from: number, ms: number, signal?: AbortSignal): Promise<void> {
  if (stream.end > from || stream.ended || ms <= 0 || signal?.aborted === true) return Promise.resolve();
  return new Promise((resolve) => {
    const finish = (): void => {
      clearTimeout(timer);
      unsubscribe();
      signal?.removeEventListener('abort', finish);
      resolve();
    };
    const timer = setTimeout(finish, ms);
    const unsubscribe = stream.onChange(() => {
      if (stream.end > from || stream.ended) finish();
    });
    signal?.addEventListener('abort', finish, { once: true });
  });
}
