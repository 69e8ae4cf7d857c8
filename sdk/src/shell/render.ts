/**
 * Terminal bytes as text for a caller that reads, not renders: what a
 * terminal would show of them, line by line. Cursor movement is applied to
 * the lines being drawn (carriage return, backspace, cursor left, right, up
 * and down, to a column, to a row and column, erasing in the line and below),
 * so a line editor's redraws and a progress line's returns leave what they
 * show last, not every draft. Other escape sequences (colours, modes, titles)
 * are removed; line ends are `\n`; invalid UTF-8 is U+FFFD.
 *
 * The text has no screen height and never wraps: a line is as long as it was
 * written. Absolute rows (`CSI row;col H`) are taken relative to the first one
 * seen, which is taken to be the row being drawn. Trailing spaces are kept on a
 * line written straight through and dropped from a line the cursor went back
 * on (an erased progress bar leaves nothing).
 * @module
 */
import { StringDecoder } from 'node:string_decoder';

/** Rows kept open for cursor movement above the last; older ones are final. */
const WINDOW_ROWS = 256;

interface Row {
  text: string;
  /** The cursor went back on this row (or it was erased): its trailing spaces are no text. */
  redrawn: boolean;
}

/**
 * `bytes` as a terminal would show them, as text (see the module's description).
 * @param rows - the terminal's height, when known: a line end on its last row scrolls, which absolute rows follow
 */
export function renderTerminalText(bytes: Uint8Array, rows?: number): string {
  const screen = new TextScreen(rows);
  screen.write(new StringDecoder('utf8').write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)));
  return screen.text();
}

class TextScreen {
  readonly #height: number | undefined;
  readonly #done: string[] = [];
  #rows: Row[] = [{ text: '', redrawn: false }];
  #row = 0;
  #col = 0;
  /** Absolute row minus window row, from the first absolute row seen. */
  #rowOrigin: number | undefined;
  #saved: { row: number; col: number } | undefined;

  constructor(height: number | undefined) {
    this.#height = height;
  }

  write(text: string): void {
    const length = text.length;
    let index = 0;
    while (index < length) {
      const code = text.charCodeAt(index);
      if (code >= 0x20 && code !== 0x7f && !(code >= 0x80 && code <= 0x9f)) {
        // A run of printable characters.
        let end = index + 1;
        while (end < length) {
          const next = text.charCodeAt(end);
          if (next < 0x20 || next === 0x7f || (next >= 0x80 && next <= 0x9f)) break;
          end += 1;
        }
        this.#put(text.slice(index, end));
        index = end;
        continue;
      }
      index += 1;
      if (code === 0x0a) this.#lineFeed();
      else if (code === 0x0d) this.#column(0);
      else if (code === 0x08) this.#column(Math.max(0, this.#col - 1));
      else if (code === 0x1b) index = this.#escape(text, index);
      else if (code === 0x9b) index = this.#csi(text, index);
      else if (code === 0x9d || code === 0x90 || code === 0x9e || code === 0x9f) index = skipString(text, index);
      // Other controls are the program's bytes (a tab, NUL in binary output), kept as text; BEL shows nothing.
      else if (code !== 0x07) this.#put(text[index - 1]!);
    }
  }

  text(): string {
    const rows = this.#rows.map(show);
    // Rows below the cursor that nothing was written on are no text; the cursor's own row ends without a line end.
    let last = rows.length - 1;
    while (last > this.#row && rows[last] === '') last -= 1;
    const lines = [...this.#done, ...rows.slice(0, last + 1)];
    return lines.join('\n');
  }

  #current(): Row {
    return this.#rows[this.#row]!;
  }

  #put(chars: string): void {
    const row = this.#current();
    const col = this.#col;
    if (col === row.text.length) row.text += chars;
    else if (col > row.text.length) row.text = row.text.padEnd(col) + chars;
    else row.text = row.text.slice(0, col) + chars + row.text.slice(col + chars.length);
    this.#col = col + chars.length;
  }

  #column(col: number): void {
    if (col < this.#col) this.#current().redrawn = true;
    this.#col = col;
  }

  #lineFeed(): void {
    // On the screen's last row a line end scrolls: the same absolute row is a new line.
    if (this.#height !== undefined && this.#rowOrigin !== undefined && this.#row + this.#rowOrigin >= this.#height) this.#rowOrigin += 1;
    this.#moveTo(this.#row + 1);
    this.#col = 0;
  }

  /** Moves to window row `row` (at least 0), adding rows below and making the oldest final past the window. */
  #moveTo(row: number): void {
    const target = Math.max(0, row);
    if (target < this.#row) this.#rows[this.#row]!.redrawn = true;
    while (this.#rows.length <= target) this.#rows.push({ text: '', redrawn: false });
    this.#row = target;
    if (target < this.#rows.length - 1) this.#rows[target]!.redrawn = true;
    const excess = this.#rows.length - WINDOW_ROWS;
    if (excess > 0) {
      for (const done of this.#rows.splice(0, excess)) this.#done.push(show(done));
      this.#row -= excess;
      if (this.#rowOrigin !== undefined) this.#rowOrigin += excess;
      if (this.#row < 0) this.#row = 0;
    }
  }

  /** Reads the escape sequence after ESC at `index`; answers the index after it. */
  #escape(text: string, index: number): number {
    const kind = text[index];
    if (kind === undefined) return index;
    if (kind === '[') return this.#csi(text, index + 1);
    if (kind === ']' || kind === 'P' || kind === '_' || kind === '^' || kind === 'X') return skipString(text, index + 1);
    if (kind === '7') this.#saved = { row: this.#row, col: this.#col };
    else if (kind === '8' && this.#saved !== undefined) {
      this.#moveTo(this.#saved.row);
      this.#column(this.#saved.col);
    } else if (kind === 'M') this.#moveTo(this.#row - 1);
    else if (kind === 'E') this.#lineFeed();
    // ESC ( B and other sequences with intermediates: up to the final byte.
    let end = index;
    while (end < text.length && text.charCodeAt(end) >= 0x20 && text.charCodeAt(end) <= 0x2f) end += 1;
    return Math.min(end + 1, text.length);
  }

  /** Reads a control sequence whose parameters start at `index`; answers the index after it. */
  #csi(text: string, index: number): number {
    let end = index;
    while (end < text.length && !(text.charCodeAt(end) >= 0x40 && text.charCodeAt(end) <= 0x7e)) end += 1;
    if (end >= text.length) return text.length;
    const raw = text.slice(index, end);
    const final = text[end]!;
    // Private (`?`, `>`) and intermediate forms move nothing here.
    if (/^[0-9;]*$/.test(raw)) this.#control(final, raw === '' ? [] : raw.split(';').map((part) => (part === '' ? 0 : Number(part))));
    return end + 1;
  }

  #control(final: string, params: number[]): void {
    const count = Math.max(1, params[0] ?? 1);
    switch (final) {
      case 'A':
        this.#moveTo(this.#row - count);
        break;
      case 'B':
        this.#moveTo(this.#row + count);
        break;
      case 'C':
        this.#col += count;
        break;
      case 'D':
        this.#column(Math.max(0, this.#col - count));
        break;
      case 'E':
        this.#moveTo(this.#row + count);
        this.#column(0);
        break;
      case 'F':
        this.#moveTo(this.#row - count);
        this.#column(0);
        break;
      case 'G':
      case '`':
        this.#column(count - 1);
        break;
      case 'H':
      case 'f':
        this.#absoluteRow(Math.max(1, params[0] ?? 1));
        this.#column(Math.max(1, params[1] ?? 1) - 1);
        break;
      case 'd':
        this.#absoluteRow(count);
        break;
      case 'K':
        this.#eraseLine(params[0] ?? 0);
        break;
      case 'J':
        this.#eraseScreen(params[0] ?? 0);
        break;
      case 'X': {
        const row = this.#current();
        const end = Math.min(row.text.length, this.#col + count);
        if (end > this.#col) row.text = row.text.slice(0, this.#col) + ' '.repeat(end - this.#col) + row.text.slice(end);
        row.redrawn = true;
        break;
      }
      case 'P': {
        const row = this.#current();
        row.text = row.text.slice(0, this.#col) + row.text.slice(this.#col + count);
        row.redrawn = true;
        break;
      }
      case '@': {
        const row = this.#current();
        if (this.#col < row.text.length) row.text = row.text.slice(0, this.#col) + ' '.repeat(count) + row.text.slice(this.#col);
        break;
      }
      case 's':
        this.#saved = { row: this.#row, col: this.#col };
        break;
      case 'u':
        if (this.#saved !== undefined) {
          this.#moveTo(this.#saved.row);
          this.#column(this.#saved.col);
        }
        break;
      default:
      // Colours, modes, scrolling regions, reports: nothing shown.
    }
  }

  #absoluteRow(row: number): void {
    this.#rowOrigin ??= row - this.#row;
    this.#moveTo(row - this.#rowOrigin);
  }

  #eraseLine(mode: number): void {
    const row = this.#current();
    row.redrawn = true;
    if (mode === 0) row.text = row.text.slice(0, this.#col);
    else if (mode === 1) row.text = ' '.repeat(Math.min(this.#col + 1, row.text.length)) + row.text.slice(this.#col + 1);
    else row.text = '';
  }

  #eraseScreen(mode: number): void {
    if (mode === 0) {
      this.#eraseLine(0);
      this.#rows.splice(this.#row + 1);
    } else if (mode === 1) {
      for (let index = 0; index < this.#row; index += 1) this.#rows[index] = { text: '', redrawn: true };
      this.#eraseLine(1);
    } else {
      // What was already shown stays text; the screen's rows still open are cleared.
      for (const row of this.#rows) {
        row.text = '';
        row.redrawn = true;
      }
    }
  }
}

function show(row: Row): string {
  return row.redrawn ? row.text.trimEnd() : row.text;
}

/** The index after the string (OSC, DCS, APC, PM, SOS) whose body starts at `index`: up to BEL or ST. */
function skipString(text: string, index: number): number {
  let at = index;
  while (at < text.length) {
    const code = text.charCodeAt(at);
    if (code === 0x07 || code === 0x9c) return at + 1;
    if (code === 0x1b && text[at + 1] === '\\') return at + 2;
    at += 1;
  }
  return text.length;
}
