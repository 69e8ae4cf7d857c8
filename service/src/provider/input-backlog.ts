/**
 * The bound on input waiting for a program that does not read it: the one
 * check of a process's stdin pipe and of a terminal's input alike. Bytes a
 * program has not taken wait in this process's memory; without the bound a
 * writer could pile them up without end.
 * @module
 */
import { ProviderError } from './errors.ts';

/** Input accepted for a program that does not read it, by default, before writes are refused. */
export const DEFAULT_INPUT_BACKLOG_BYTES = 4 * 1024 * 1024;

export class InputBacklog {
  /** The most bytes that may wait. */
  readonly limitBytes: number;
  /** What the refusal says does not read, and what: "the process is not reading its stdin". */
  readonly #notReading: string;

  constructor(limitBytes: number | undefined, notReading: string) {
    this.limitBytes = limitBytes ?? DEFAULT_INPUT_BACKLOG_BYTES;
    this.#notReading = notReading;
  }

  /**
   * Lets `bytes` more go to a program that has not yet taken `waiting`. A write is refused
   * only while something already waits: one write larger than the bound still reaches a
   * program that reads, and it is what piles up that is bounded.
   * @throws {ProviderError} LIMIT_EXCEEDED when the bytes would take the backlog past the bound.
   */
  admit(waiting: number, bytes: number): void {
    if (waiting > 0 && waiting + bytes > this.limitBytes) {
      throw new ProviderError('LIMIT_EXCEEDED', `${this.#notReading}: ${waiting} bytes already wait (the limit is ${this.limitBytes})`);
    }
  }
}
