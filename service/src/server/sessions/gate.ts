/**
 * At most a fixed number of tasks at a time; the others wait their turn, in
 * the order they came.
 * @module
 */

export class Gate {
  readonly #width: number;
  #running = 0;
  /** The tasks waiting for a turn: bounded by what may call `run` (for endings, the sessions there are). */
  readonly #waiting: (() => void)[] = [];

  constructor(width: number) {
    if (!Number.isSafeInteger(width) || width < 1) throw new RangeError(`a gate is at least 1 wide, not ${width}`);
    this.#width = width;
  }

  /** How many tasks run now, and how many wait. */
  get load(): { running: number; waiting: number } {
    return { running: this.#running, waiting: this.#waiting.length };
  }

  /** Runs `task` once fewer than the gate's width run; settles as it does. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#width) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running += 1;
    try {
      return await task();
    } finally {
      // The turn passes straight to the next in line, so the count never drops below the width while tasks wait.
      const next = this.#waiting.shift();
      if (next === undefined) this.#running -= 1;
      else next();
    }
  }
}
