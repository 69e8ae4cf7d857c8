/**
 * Terminal bytes as text for a caller that reads, not renders: escape
 * sequences removed, line ends as `\n`, invalid UTF-8 as U+FFFD.
 * @module
 */

const ESC = 0x1b;
const BEL = 0x07;
const CR = 0x0d;
const LF = 0x0a;

/** `bytes` without escape sequences (CSI, OSC, and two-byte ones) and BEL, CRLF and lone CR as LF, decoded. */
export function renderTerminalText(bytes: Uint8Array): string {
  const out = Buffer.allocUnsafe(bytes.length);
  let length = 0;
  let index = 0;
  while (index < bytes.length) {
    const byte = bytes[index]!;
    if (byte === ESC) {
      index = skipEscape(bytes, index);
      continue;
    }
    index += 1;
    if (byte === BEL) continue;
    if (byte === CR) {
      // CRLF is one line end; a lone CR (a progress bar's return) starts a new line too.
      if (bytes[index] === LF) index += 1;
      out[length++] = LF;
      continue;
    }
    out[length++] = byte;
  }
  return out.toString('utf8', 0, length);
}

/** The index after the escape sequence at `start` (an unterminated one runs to the end). */
function skipEscape(bytes: Uint8Array, start: number): number {
  const kind = bytes[start + 1];
  if (kind === undefined) return start + 1;
  if (kind === 0x5b) {
    // CSI: parameters and intermediates up to a final byte in 0x40-0x7e.
    let index = start + 2;
    while (index < bytes.length && !(bytes[index]! >= 0x40 && bytes[index]! <= 0x7e)) index += 1;
    return Math.min(index + 1, bytes.length);
  }
  if (kind === 0x5d || kind === 0x50 || kind === 0x5f || kind === 0x5e) {
    // OSC, DCS, APC, PM: up to BEL or ST (ESC \).
    let index = start + 2;
    while (index < bytes.length) {
      if (bytes[index] === BEL) return index + 1;
      if (bytes[index] === ESC && bytes[index + 1] === 0x5c) return index + 2;
      index += 1;
    }
    return bytes.length;
  }
  return start + 2;
}
