/**
 * The text rules of the filesystem seam: what counts as text (strict UTF-8,
 * no NUL in the sampled head), line-ending normalisation and restoration, and
 * the literal edit.
 * @module
 */
import { BINARY_SAMPLE_BYTES, binaryHead, toLf, utf8Text } from '@execworld/sdk/fs';
import { FsFailure } from './fs-error.ts';

export { BINARY_SAMPLE_BYTES, toLf };

/** Decodes strict UTF-8, or throws FS_NOT_TEXT naming `displayPath`. */
export function decodeText(bytes: Uint8Array, doing: string, displayPath: string): string {
  const text = utf8Text(bytes);
  if (text === undefined) throw new FsFailure('FS_NOT_TEXT', `cannot ${doing} "${displayPath}": not UTF-8 text`);
  return text;
}

/** Throws FS_NOT_TEXT when the head of a file (`sample`) holds a NUL. */
export function rejectBinaryHead(sample: Uint8Array, doing: string, displayPath: string): void {
  if (binaryHead(sample)) throw new FsFailure('FS_NOT_TEXT', `cannot ${doing} "${displayPath}": a binary file (NUL byte)`);
}

export type LineEndings = 'LF' | 'CRLF';

/** The file's line-ending style, from its first 4096 characters: CRLF when CRLF breaks outnumber bare LF ones. */
export function lineEndingsOf(text: string): LineEndings {
  const head = text.slice(0, 4096);
  let crlf = 0;
  let lf = 0;
  for (let at = head.indexOf('\n'); at !== -1; at = head.indexOf('\n', at + 1)) {
    if (at > 0 && head.charCodeAt(at - 1) === 13) crlf += 1;
    else lf += 1;
  }
  return crlf > lf ? 'CRLF' : 'LF';
}

/** LF-normalised `text` written back in `style`, never doubling a CR. */
export function withLineEndings(text: string, style: LineEndings): string {
  return style === 'LF' ? text : toLf(text).replaceAll('\n', '\r\n');
}

/** Non-overlapping occurrences of `needle` (non-empty) in `haystack`. */
function occurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) count += 1;
  return count;
}

/**
 * The literal edit on LF-normalised `content`: `oldString` (normalised too)
 * must occur once, or at least once with `replaceAll`.
 * @throws FS_EDIT_NOT_FOUND for an empty or absent oldString, FS_AMBIGUOUS_EDIT for several matches without replaceAll
 */
export function applyEdit(content: string, edit: { oldString: string; newString: string; replaceAll: boolean }, displayPath: string): string {
  const needle = toLf(edit.oldString);
  if (needle === '') throw new FsFailure('FS_EDIT_NOT_FOUND', 'oldString must not be empty');
  const replacement = toLf(edit.newString);
  const count = occurrences(content, needle);
  if (count === 0) throw new FsFailure('FS_EDIT_NOT_FOUND', `oldString does not occur in "${displayPath}"`);
  if (count > 1 && !edit.replaceAll) {
    throw new FsFailure('FS_AMBIGUOUS_EDIT', `oldString occurs ${count} times in "${displayPath}"; make it unique or set replaceAll`);
  }
  return content.split(needle).join(replacement);
}
