/**
 * Turns for writers of one target: every view of one daemon shares them, so
 * writes of one file through different owners (or calls) run one after the
 * other, in the order they came.
 * @module
 */

/** FIFO turns per target key. */
export class MutationLocks {
  readonly #tails = new Map<string, Promise<void>>();

  async exclusive<T>(key: string, work: () => Promise<T>): Promise<T> {
    const prior = this.#tails.get(key) ?? Promise.resolve();
    let done!: () => void;
    const tail = prior.then(() => new Promise<void>((resolve) => (done = resolve)));
    this.#tails.set(key, tail);
    await prior;
    try {
      return await work();
    } finally {
      done();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  /** Targets with a write queued or running. */
  get size(): number {
    return this.#tails.size;
  }
}
