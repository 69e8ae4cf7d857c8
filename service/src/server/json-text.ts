/**
 * JSON text from a client, parsed only once its nesting is known to be
 * shallow. Every call's parameters nest a few levels; a text nested millions
 * deep (a 30 MiB `[[[…]]]`) would have the parser build millions of arrays,
 * gigabytes of them, and hold the event loop for seconds before any schema
 * could refuse it. The scan before the parse skips the strings with the
 * engine's own search, so a large text of file content costs little more.
 * @module
 */
import { ServiceError } from './errors.ts';

/** The deepest nesting of arrays and objects a request body or a WebSocket message may have. */
export const MAX_JSON_DEPTH = 64;

/** Whether `text` opens more than `limit` arrays and objects inside one another (outside its strings). */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code === 0x22) {
      // A string: on to its closing quote, one preceded by an even number of backslashes.
      let end = index;
      for (;;) {
        end = text.indexOf('"', end + 1);
        // Unterminated: not JSON, which the parse says.
        if (end < 0) return false;
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === 0x5c) backslashes += 1;
        if (backslashes % 2 === 0) break;
      }
      index = end;
    } else if (code === 0x5b || code === 0x7b) {
      depth += 1;
      if (depth > limit) return true;
    } else if (code === 0x5d || code === 0x7d) {
      depth -= 1;
    }
  }
  return false;
}

/**
 * Parses `text` (`what` names it in the refusal: "the request body", "the message").
 * @throws {ServiceError} INVALID_ARGUMENT when it nests deeper than {@link MAX_JSON_DEPTH} or is not JSON.
 */
export function parseClientJson(text: string, what: string): unknown {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new ServiceError('INVALID_ARGUMENT', `${what} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
  }
  try {
    return JSON.parse(text);
  } catch (_error) {
    throw new ServiceError('INVALID_ARGUMENT', `${what} is not valid JSON`);
  }
}
