/**
 * The seam's text rule for a file read as a stream: strict UTF-8, and no NUL
 * in the first {@link BINARY_SAMPLE_BYTES} bytes (the mark of a binary file).
 * The daemon's streamed reads and the remote provider's both apply it.
 * @module
 */
import { isAscii, isUtf8 } from 'node:buffer';
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

/**
 * Bytes held whole as strict UTF-8 text, or undefined when they are not
 * UTF-8. Validating and converting in one native pass each is several times
 * faster than a fatal TextDecoder on megabytes. A leading byte-order mark is
 * dropped, as a TextDecoder drops it, unless `keepByteOrderMark` (the bytes of
 * a write, which are written back as they came).
 */
export function utf8Text(bytes: Uint8Array, options: { keepByteOrderMark?: boolean } = {}): string | undefined {
  if (!isUtf8(bytes)) return undefined;
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // ASCII (most source text) reads the same as Latin-1, which is copied into a string rather than decoded: about twice as fast.
  const text = isAscii(buffer) ? buffer.toString('latin1') : buffer.toString('utf8');
  return options.keepByteOrderMark !== true && text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** Whether the sampled head of a file's bytes holds a NUL: the mark of a binary file. */
export function binaryHead(bytes: Uint8Array): boolean {
  return bytes.subarray(0, BINARY_SAMPLE_BYTES).includes(0);
}

/** `text` with every CRLF pair turned into LF; a lone CR stays. What a write's `after` and `before` are given as. */
export function toLf(text: string): string {
  return text.replaceAll('\r\n', '\n');
}
