/**
 * At most a fixed number of tasks start their work at a time; the others wait
 * their turn, in the order they came. A task holds its turn until it settles
 * or until `holdMs` passed, whichever is first: one that waits long (an
 * ending in its grace) then goes on without holding up those behind it.
 * @module
 */

export class Gate {
  readonly #width: number;
  readonly #holdMs: number;
  #running = 0;
  /** The tasks waiting for a turn: bounded by what may call `run` (for endings, the sessions there are). */
  readonly #waiting: (() => void)[] = [];

  constructor(width: number, holdMs: number) {
    if (!Number.isSafeInteger(width) || width < 1) throw new RangeError(`a gate is at least 1 wide, not ${width}`);
    if (!Number.isSafeInteger(holdMs) || holdMs < 1) throw new RangeError(`a turn is held at least 1 ms, not ${holdMs}`);
    this.#width = width;
    this.#holdMs = holdMs;
  }

  /** How many tasks hold a turn now, and how many wait for one. */
  get load(): { running: number; waiting: number } {
    return { running: this.#running, waiting: this.#waiting.length };
  }

  /** Runs `task` in its turn; settles as the task does. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#width) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running += 1;
    let passed = false;
    const pass = (): void => {
      if (passed) return;
      passed = true;
      clearTimeout(timer);
      // The turn goes straight to the next in line, so the count never drops below the width while tasks wait.
      const next = this.#waiting.shift();
      if (next === undefined) this.#running -= 1;
      else next();
    };
    const timer = setTimeout(pass, this.#holdMs);
    try {
      return await task();
    } finally {
      pass();
    }
  }
}
