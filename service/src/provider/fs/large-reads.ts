/**
 * The read size of the content streams of one process: large reads while
 * few streams read large, fs's own size beyond them.
 * @module
 */

/**
 * The size of each read of a content stream while few read large: with fs's
 * 64 KiB a 10 MiB file takes 160 reads, each a trip to the thread pool and a
 * socket write, and a reader at the other end of a loopback pays as much
 * again for each chunk; 1 MiB reads sent it in about a third of the time.
 * A smaller file's one read is its size.
 */
export const LARGE_READ_BYTES = 1024 * 1024;
/** fs's own read size, for the streams beyond {@link LARGE_READS_AT_ONCE}. */
export const SMALL_READ_BYTES = 64 * 1024;
/**
 * How many content streams of a process read large at once. A stream holds
 * up to a read in its buffer and one in its socket's: a reader that reads
 * slowly (or not at all) holds about twice the read size, so this bounds what
 * the large reads may hold to about 32 MiB, however many streams are open.
 */
export const LARGE_READS_AT_ONCE = 16;

export class LargeReads {
  #inFlight = 0;

  /** Streams reading large now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * The read size of a stream that starts now, and what ends its claim on a
   * large read (called when the stream ends, fails or is closed; more than once is harmless).
   */
  lease(): { readonly bytes: number; readonly release: () => void } {
    if (this.#inFlight >= LARGE_READS_AT_ONCE) return { bytes: SMALL_READ_BYTES, release: () => undefined };
    this.#inFlight += 1;
    let released = false;
    return {
      bytes: LARGE_READ_BYTES,
      release: () => {
        if (released) return;
        released = true;
        this.#inFlight -= 1;
      },
    };
  }
}
