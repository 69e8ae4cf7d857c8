/**
 * Idempotent input writes: a write carrying a writer id and a sequence number
 * is applied once, however often it is sent. Numbers are counted per writer,
 * so two clients writing to one session never mistake each other's writes for
 * retries.
 * @module
 */
import { ServiceError } from './errors.ts';

/** Writers remembered per session; the least recently seen is forgotten first. */
const MAX_WRITERS = 64;
/** Outcomes remembered per writer, for retries of its latest writes. */
const RETRY_WINDOW = 64;

/** A writer's sequence numbers, as a takeover hands them to the next image of the daemon. */
export interface WriterState {
  readonly writer: string;
  readonly last: number;
  readonly recent: number[];
}

interface Writer {
  /** Highest sequence number seen. */
  last: number;
  /** The latest writes' outcomes by sequence number, oldest first. */
  readonly recent: Map<number, Promise<void>>;
  /** The recent numbers whose write was applied whole (its promise fulfilled): only these are known after a takeover. */
  readonly applied: Set<number>;
}

export class InputSequencer {
  readonly #writers = new Map<string, Writer>();

  /**
   * Applies a write unless it is a retry. Resolves true when `apply` ran, false
   * for a retry of a write that succeeded; a retry of a write that failed fails
   * the same way, so a write that was not applied never answers as a success.
   * @throws {ServiceError} INVALID_ARGUMENT for a seq without a writer, or one
   *   older than the retry window.
   */
  async run(writer: string | undefined, seq: number | undefined, apply: () => Promise<void>): Promise<boolean> {
    if (seq === undefined) {
      await apply();
      return true;
    }
    if (writer === undefined) throw new ServiceError('INVALID_ARGUMENT', 'seq needs a writer: sequence numbers are counted per writer');
    const state = this.#writer(writer);
    const known = state.recent.get(seq);
    if (known !== undefined) {
      await known;
      return false;
    }
    if (seq <= state.last - RETRY_WINDOW) {
      throw new ServiceError(
        'INVALID_ARGUMENT',
        `seq ${seq} of writer ${writer} is older than its last ${RETRY_WINDOW} writes; its outcome is no longer known`,
      );
    }
    // A number below the last one that was never seen is a write that arrived late: applied, not dropped.
    state.last = Math.max(state.last, seq);
    const outcome = apply();
    outcome.catch(() => undefined);
    state.recent.set(seq, outcome);
    outcome.then(
      () => {
        if (state.recent.get(seq) === outcome) state.applied.add(seq);
      },
      () => undefined,
    );
    if (state.recent.size > RETRY_WINDOW) {
      const oldest = state.recent.keys().next().value!;
      state.recent.delete(oldest);
      state.applied.delete(oldest);
    }
    await outcome;
    return true;
  }

  /**
   * Each writer's last sequence number and the recent ones applied whole, oldest writer first:
   * what a takeover keeps. A write under way or failed is left out, so that its retry is applied.
   */
  snapshot(): WriterState[] {
    return [...this.#writers].map(([writer, state]) => ({
      writer,
      last: state.last,
      recent: [...state.recent.keys()].filter((seq) => state.applied.has(seq)),
    }));
  }

  /** Takes the writers of {@link snapshot}: a retry of a write applied before the takeover is known as one. */
  restore(writers: readonly WriterState[]): void {
    for (const { writer, last, recent } of writers.slice(-MAX_WRITERS)) {
      const state = this.#writer(writer);
      state.last = Math.max(state.last, last);
      for (const seq of recent.slice(-RETRY_WINDOW)) {
        state.recent.set(seq, Promise.resolve());
        state.applied.add(seq);
      }
    }
  }

  #writer(id: string): Writer {
    let state = this.#writers.get(id);
    if (state === undefined) {
      state = { last: 0, recent: new Map(), applied: new Set() };
      if (this.#writers.size >= MAX_WRITERS) this.#writers.delete(this.#writers.keys().next().value!);
    } else {
      this.#writers.delete(id);
    }
    // Re-inserted: the map's order is the order writers were last seen.
    this.#writers.set(id, state);
    return state;
  }
}
