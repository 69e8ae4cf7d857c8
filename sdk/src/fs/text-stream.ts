/**
 * The seam's text rule for a file read as a stream: strict UTF-8, and no NUL
 * in the first {@link BINARY_SAMPLE_BYTES} bytes (the mark of a binary file).
 * The daemon's streamed reads and the remote provider's both apply it.
 * @module
 */
import { TextDecoder } from 'node:util';

/** How many leading bytes of a text file are checked for NUL. */
export const BINARY_SAMPLE_BYTES = 8192;

/** Why bytes are not text: a NUL in the sampled head, or invalid UTF-8. */
export type NotTextReason = 'binary' | 'not UTF-8';

/** Decodes a file's chunks in order, failing with the caller's error at the first breach of the rule. */
export class TextStreamDecoder {
  readonly #decoder = new TextDecoder('utf-8', { fatal: true });
  readonly #fail: (reason: NotTextReason, cause?: unknown) => Error;
  #sampled = 0;

  constructor(fail: (reason: NotTextReason, cause?: unknown) => Error) {
    this.#fail = fail;
  }

  /** The text of the next chunk; called with none at the end, where a character left incomplete fails. */
  decode(chunk?: Uint8Array): string {
    if (chunk !== undefined && this.#sampled < BINARY_SAMPLE_BYTES) {
      const head = chunk.subarray(0, BINARY_SAMPLE_BYTES - this.#sampled);
      if (head.includes(0)) throw this.#fail('binary');
      this.#sampled += head.length;
    }
    try {
      return chunk === undefined ? this.#decoder.decode() : this.#decoder.decode(chunk, { stream: true });
    } catch (error) {
      throw this.#fail('not UTF-8', error);
    }
  }
}
