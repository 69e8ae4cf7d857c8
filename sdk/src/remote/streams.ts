/**
 * Node streams over daemon streams, with the daemon's credits as their
 * backpressure: bytes are acknowledged only as the reader takes them, so a
 * paused reader stops the daemon's sending, then its ring fills and the
 * program blocks. The SDK holds at most a window plus a stream buffer per stream.
 * @module
 */
import { Readable, Writable } from 'node:stream';
import { ByteTail } from '../seam/byte-tail.ts';
import type { SubprocessOutputRead, SubprocessOutputReader } from '../seam/types.ts';
import type { Connection } from './connection.ts';
import type { StreamHandlers, Subscription } from '../client/subscription.ts';
import type { StreamRef } from '../protocol/frames.ts';
import type { ExecworldError } from '../errors.ts';

/** Buffered in a readable before the daemon's window is left to close. */
const READABLE_HIGH_WATER_BYTES = 64 * 1024;

export interface StreamEvents {
  /** The stream ended after its last byte. */
  onEnd?(offset: number): void;
  onError?(error: ExecworldError): void;
}

/** A readable of one daemon stream from an offset. */
export class SubscribedReadable extends Readable {
  readonly #subscription: Subscription;
  /** Bytes handed to the stream's buffer: acknowledged once the reader has room. */
  #delivered: number;
  #waiting = false;
  /** Acknowledges on arrival, whatever the reader does (see release). */
  #released = false;
  /** Called after each delivery, end or failure: waiters of whenEmitted. */
  readonly #progress = new Set<() => void>();

  constructor(connection: Connection, target: StreamRef, from: number, events: StreamEvents = {}) {
    super({ highWaterMark: READABLE_HIGH_WATER_BYTES });
    this.#delivered = from;
    const handlers: StreamHandlers = {
      onData: (chunk) => {
        this.#delivered += chunk.length;
        // A Buffer view of the frame, not a copy.
        const pushed = this.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        if (!pushed && !this.#released) this.#waiting = true;
        else if (this.#delivered - this.#subscription.acked >= this.#subscription.window / 4) this.#subscription.ack(this.#delivered);
        this.#notifyProgress();
      },
      onGap: (_from, to) => {
        this.#delivered = to;
        this.#notifyProgress();
      },
      onEnd: (offset) => {
        this.push(null);
        events.onEnd?.(offset);
        this.#notifyProgress();
      },
      onError: (error) => {
        queueMicrotask(() => this.#notifyProgress());
        events.onError?.(error);
        // The caller's own close detaches the stream: it closes quietly, as a socket destroyed by its owner
        // does. A lost connection is a transport failure, reported as 'error'.
        if (error.code === 'CLOSED') this.destroy();
        else this.destroy(error);
      },
    };
    this.#subscription = connection.subscribe(target, from, handlers);
  }

  /**
   * From now on the stream takes what the daemon sends even while its reader
   * waits: for a stream whose program has exited, the rest is bounded by the
   * daemon's ring, and taking it lets the stream end as a local one does (its
   * end is queued behind the data, not behind the reader).
   */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#waiting = false;
    this.#subscription.ack(this.#delivered);
  }

  /** The offset of the next byte this stream will deliver. */
  get offset(): number {
    return this.#delivered;
  }

  /**
   * Resolves true once every byte before `offset` was emitted to the reader
   * (handed on and not left in this stream's buffer), false when the reader
   * holds bytes back, the stream ends or fails first, or `timeoutMs` passes.
   */
  whenEmitted(offset: number, timeoutMs: number): Promise<boolean> {
    const check = (): boolean | undefined => {
      if (this.readableLength > 0 || this.destroyed || this.readableEnded) return false;
      return this.#delivered >= offset ? true : undefined;
    };
    const now = check();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve) => {
      const settle = (value: boolean): void => {
        clearTimeout(timer);
        this.#progress.delete(onProgress);
        resolve(value);
      };
      const onProgress = (): void => {
        const answer = check();
        if (answer !== undefined) settle(answer);
      };
      const timer = setTimeout(() => settle(false), timeoutMs);
      this.#progress.add(onProgress);
    });
  }

  #notifyProgress(): void {
    for (const waiter of [...this.#progress]) waiter();
  }

  override _read(): void {
    // The reader has room again after a full buffer: what was delivered is consumed.
    // A reader that keeps up is acknowledged every quarter window from onData instead,
    // so an interactive echo costs no extra message (the daemon keeps 3/4 of its window).
    if (this.#waiting) {
      this.#waiting = false;
      this.#subscription.ack(this.#delivered);
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#subscription.close();
    callback(error);
  }
}

/**
 * The replica of a collected stream: the same bounded tail the daemon keeps,
 * filled by a subscription that never blocks the program, read synchronously.
 * It reads as empty until {@link RemoteCollector.attach} names its stream.
 */
export class RemoteCollector implements SubprocessOutputReader {
  readonly #tail: ByteTail;
  #spillPath: string | undefined;
  readonly ended: Promise<void>;
  #resolveEnded!: () => void;

  constructor(maxBytes: number) {
    this.#tail = new ByteTail(maxBytes);
    this.ended = new Promise((resolve) => (this.#resolveEnded = resolve));
  }

  /** Starts replicating `target`. */
  attach(connection: Connection, target: StreamRef): void {
    const subscription = connection.subscribe(target, 0, {
      onData: (chunk) => {
        // Kept as its own bytes: the frame's buffer is not ours to hold.
        this.#tail.push(chunk.slice());
        subscription.ack(subscription.received);
      },
      onGap: (_from, to) => this.#tail.skipTo(to),
      onEnd: () => this.#resolveEnded(),
      onError: () => this.#resolveEnded(),
    });
  }

  /** There is nothing to replicate (the spawn failed). */
  abandon(): void {
    this.#resolveEnded();
  }

  /** Set once the daemon reports the spill file of a settled stream. */
  set spillPath(path: string | undefined) {
    this.#spillPath = path;
  }

  readFrom(fromByte: number): SubprocessOutputRead {
    return this.#tail.readFrom(fromByte, this.#spillPath);
  }
}

/** A process's stdin pipe: each write is a sequenced call, so a retry after a reconnect is applied once. */
export class RemoteStdin extends Writable {
  readonly #write: (chunk: Buffer) => Promise<void>;
  readonly #close: () => Promise<void>;

  constructor(write: (chunk: Buffer) => Promise<void>, close: () => Promise<void>) {
    super({ highWaterMark: 64 * 1024 });
    this.#write = write;
    this.#close = close;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#write(chunk).then(
      () => callback(),
      (error: Error) => callback(asPipeError(error)),
    );
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#close().then(
      () => callback(),
      (error: Error) => callback(asPipeError(error)),
    );
  }
}

/** A write to a stdin the child closed fails as it would locally: EPIPE, with the daemon's error as cause. */
function asPipeError(error: Error): Error {
  if ((error as ExecworldError).code !== 'PROCESS_EXITED') return error;
  return Object.assign(new Error(`write EPIPE: ${error.message}`, { cause: error }), { code: 'EPIPE', errno: -32, syscall: 'write' });
}
