/**
 * Spots terminal queries in a terminal's output without emulating it, so that
 * a terminal whose program never asks costs a byte search, not an emulator.
 *
 * A query is a control sequence a terminal answers on its input: device
 * status and cursor position reports (`CSI … n`), device attributes
 * (`CSI … c`), mode reports (`CSI … $ p`), and setting requests (`DCS $ q …`;
 * any DCS string counts). The scanner may report more than the emulator
 * answers (that only starts the emulator early) but never less. Sequences may
 * be split across chunks, and the 8-bit forms (CSI and DCS as the UTF-8 of
 * U+009B and U+0090) count too, as the emulator decodes them so.
 * @module
 */

const ESC = 0x1b;
/** The first byte of the UTF-8 encoding of U+0080–U+00BF, among them the C1 controls. */
const C2 = 0xc2;
const C1_CSI = 0x9b;
const C1_DCS = 0x90;
const CAN = 0x18;
const SUB = 0x1a;

/** The scanner's states. */
const State = {
  Ground: 0,
  /** After ESC. */
  Escape: 1,
  /** After ESC and an intermediate byte (`ESC ( B`): the next final byte ends it. */
  EscapeIntermediate: 2,
  /** Inside a control sequence: parameters and intermediates until the final byte. */
  Csi: 3,
} as const;
type State = (typeof State)[keyof typeof State];

export class QueryScanner {
  #state: State = State.Ground;
  /** The control sequence has the intermediate `$` (a mode report is `CSI … $ p`). */
  #dollar = false;
  /** The last byte was 0xC2, so the next may complete a C1 control. */
  #afterC2 = false;

  /** Reads `chunk` on from where the previous one ended; true when a query ended in it. */
  scan(chunk: Uint8Array): boolean {
    // The state lives in locals while the chunk is read (the loop runs per byte of a sequence).
    let state = this.#state;
    let dollar = this.#dollar;
    let afterC2 = this.#afterC2;
    let found = false;
    const length = chunk.length;
    // Where the next ESC and 0xC2 are, searched again only once passed.
    let nextEscape = -1;
    let nextC2 = -1;
    let index = 0;
    while (index < length) {
      if (state === State.Ground && !afterC2) {
        // Plain text: jump to the next byte that can start a sequence.
        if (nextEscape < index) {
          nextEscape = chunk.indexOf(ESC, index);
          if (nextEscape === -1) nextEscape = length;
        }
        if (nextC2 < index) {
          nextC2 = chunk.indexOf(C2, index);
          if (nextC2 === -1) nextC2 = length;
        }
        index = Math.min(nextEscape, nextC2);
        if (index >= length) break;
      }
      const byte = chunk[index]!;
      index += 1;
      if (afterC2) {
        afterC2 = false;
        if (byte === C1_CSI) {
          state = State.Csi;
          dollar = false;
          continue;
        }
        if (byte === C1_DCS) {
          state = State.Ground;
          found = true;
          continue;
        }
        // Another C1 control ends what was going on; any other character leaves it be.
        if (byte >= 0x80 && byte <= 0x9f) {
          state = State.Ground;
          continue;
        }
        if (byte >= 0xa0 && byte <= 0xbf) continue;
        // Not a continuation byte: the 0xC2 was stray, and this byte counts on its own.
      }
      if (byte === ESC) {
        state = State.Escape;
      } else if (byte === C2) {
        afterC2 = true;
      } else if (byte === CAN || byte === SUB) {
        state = State.Ground;
      } else if (state === State.Csi) {
        if (byte === 0x24) dollar = true;
        else if (byte >= 0x40 && byte <= 0x7e) {
          // The final byte: n (status reports), c (device attributes), p after $ (mode reports).
          if (byte === 0x6e || byte === 0x63 || (byte === 0x70 && dollar)) found = true;
          state = State.Ground;
        }
      } else if (state === State.Escape) {
        if (byte === 0x5b) {
          state = State.Csi;
          dollar = false;
        } else if (byte === 0x50) {
          // A DCS string: setting requests are among them.
          state = State.Ground;
          found = true;
        } else if (byte >= 0x20 && byte <= 0x2f) state = State.EscapeIntermediate;
        else if (byte >= 0x30 && byte <= 0x7e) state = State.Ground;
      } else if (state === State.EscapeIntermediate && byte >= 0x30 && byte <= 0x7e) {
        state = State.Ground;
      }
    }
    this.#state = state;
    this.#dollar = dollar;
    this.#afterC2 = afterC2;
    return found;
  }
}
