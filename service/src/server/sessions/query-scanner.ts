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
    let found = false;
    let index = 0;
    const length = chunk.length;
    // Where the next 0xC2 is, searched again only once passed.
    let nextC2 = -1;
    while (index < length) {
      if (this.#state === State.Ground && !this.#afterC2) {
        // Plain text: jump to the next byte that can start a sequence.
        if (nextC2 < index) {
          nextC2 = chunk.indexOf(C2, index);
          if (nextC2 === -1) nextC2 = length;
        }
        let escape = chunk.indexOf(ESC, index);
        if (escape === -1 || escape > nextC2) escape = nextC2;
        if (escape >= length) return found;
        index = escape;
      }
      if (this.#step(chunk[index]!)) found = true;
      index += 1;
    }
    return found;
  }

  /** One byte; true when it ends a query. */
  #step(byte: number): boolean {
    if (this.#afterC2) {
      this.#afterC2 = false;
      if (byte === C1_CSI) return this.#enterCsi();
      if (byte === C1_DCS) return this.#ground(true);
      // Another C1 control ends what was going on; any other character leaves it be.
      if (byte >= 0x80 && byte <= 0x9f) return this.#ground(false);
      if (byte >= 0xa0 && byte <= 0xbf) return false;
      // Not a continuation byte: the 0xC2 was stray, this byte counts on its own.
    }
    if (byte === ESC) {
      this.#state = State.Escape;
      return false;
    }
    if (byte === C2) {
      this.#afterC2 = true;
      return false;
    }
    if (byte === CAN || byte === SUB) return this.#ground(false);
    switch (this.#state) {
      case State.Ground:
        return false;
      case State.Escape:
        if (byte === 0x5b) return this.#enterCsi();
        if (byte === 0x50) return this.#ground(true);
        if (byte >= 0x20 && byte <= 0x2f) this.#state = State.EscapeIntermediate;
        else if (byte >= 0x30 && byte <= 0x7e) this.#state = State.Ground;
        return false;
      case State.EscapeIntermediate:
        if (byte >= 0x30 && byte <= 0x7e) this.#state = State.Ground;
        return false;
      case State.Csi:
        if (byte === 0x24) this.#dollar = true;
        if (byte < 0x40 || byte > 0x7e) return false;
        return this.#ground(byte === 0x6e || byte === 0x63 || (byte === 0x70 && this.#dollar));
    }
  }

  #enterCsi(): boolean {
    this.#state = State.Csi;
    this.#dollar = false;
    return false;
  }

  #ground(query: boolean): boolean {
    this.#state = State.Ground;
    return query;
  }
}
