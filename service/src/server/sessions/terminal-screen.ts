/**
 * A terminal's screen: a headless terminal emulator fed the terminal's output,
 * made only when it is needed, and the answers it gives to the queries of the
 * terminal's program.
 *
 * Lifecycle. Nothing is emulated until somebody asks for the screen, or the
 * program sends a query while the daemon answers queries (a
 * {@link QueryScanner} watches the output for one, at the cost of a byte
 * search). The emulator then starts from the oldest byte the output ring
 * retains (a screen says `complete: false` when that is not the first byte),
 * and from then on is fed every byte of the terminal's output for as long as
 * the session is kept.
 *
 * Feeding. One parser write is in flight at a time; what arrives meanwhile
 * waits in the ring and goes in the next write, up to {@link BATCH_BYTES} at
 * once. The ring keeps every byte the emulator has not taken and stops the
 * program once `ringBytes` of them wait, as it does for a reader that lags.
 * A resize takes effect at the output offset where it happened, so bytes
 * written before it are parsed at the old size.
 *
 * Queries. What the emulator would send back (cursor position, device
 * attributes, mode and setting reports) is written to the terminal's input,
 * when the daemon answers queries, and only for bytes that were live when the
 * emulator read them: bytes replayed from the ring to a late emulator are
 * parsed with answers muted. Each byte is parsed once, so each query is
 * answered once, whoever reads the output and from where.
 *
 * Snapshots. A snapshot waits until the emulator has parsed every byte the
 * terminal had produced when it was asked, and is taken between two writes:
 * its offset is the end of the last byte parsed, with nothing after it.
 * @module
 */
import xterm from '@xterm/headless';
import type { RingStream } from '../streams.ts';
import { ServiceError } from '../errors.ts';
import { QueryScanner } from '../../provider/api.ts';

/** Largest slice of output one parser write takes: a write runs to its end, so this bounds how long it holds the event loop. */
export const BATCH_BYTES = 64 * 1024;
/** Size changes kept for an emulator that has not reached them; past it the two oldest merge (and the screen is no longer complete). */
const MAX_PENDING_SIZES = 64;
/** Longest window title kept, in UTF-16 units. */
const MAX_TITLE_LENGTH = 4096;
const TRAILING_SPACES = / +$/;
/** The emulator's narrowest terminal (xterm's limit). */
const MIN_EMULATOR_COLS = 2;

/** The screen as a snapshot gives it. */
export interface ScreenSnapshot {
  readonly offset: number;
  readonly complete: boolean;
  readonly rows: number;
  readonly cols: number;
  readonly lines: string[];
  readonly cursor: { readonly row: number; readonly col: number; readonly visible: boolean };
  readonly alternate: boolean;
  readonly title: string;
}

export interface TerminalScreenOptions {
  readonly rows: number;
  readonly cols: number;
  /** Whether the daemon answers the program's queries. */
  readonly answerQueries: boolean;
  /** The most cells (rows × cols) an emulator is made for. */
  readonly maxCells: number;
  /** Writes an answer to the terminal's input. */
  readonly reply: (data: string) => void;
}

/** A size the terminal took at output offset `at`. */
interface SizeMark {
  readonly at: number;
  readonly rows: number;
  readonly cols: number;
}

interface Waiter {
  readonly target: number;
  resolve(snapshot: ScreenSnapshot): void;
  reject(error: Error): void;
}

/** Whether a DECSET/DECRST parameter list names mode 25, the cursor's visibility. */
const namesCursorMode = (params: (number | number[])[]): boolean => params.some((param) => param === 25);

export class TerminalScreen {
  readonly #ring: RingStream;
  readonly #answer: boolean;
  readonly #maxCells: number;
  readonly #reply: (data: string) => void;
  #scanner = new QueryScanner();
  /**
   * Size changes the emulator has not applied, oldest first. Without an
   * emulator, the first is the size in effect at the oldest retained byte.
   */
  #sizes: SizeMark[];
  /** Two size changes were merged: an emulator that started before them draws with a wrong size for a while. */
  #sizesMerged = false;

  #term: xterm.Terminal | undefined;
  #unlisten: (() => void) | undefined;
  /** The emulator's first byte. */
  #origin = 0;
  /** Bytes before this were in the ring before the emulator existed: their queries are not answered. */
  #liveFrom = 0;
  #complete = false;
  /** The offset after the last byte handed to the emulator; while no write is in flight, after the last byte parsed. */
  #fed = 0;
  #writing = false;
  /** The write in flight holds replayed bytes, or the daemon does not answer: what the emulator sends back is dropped. */
  #muted = true;
  #cursorHidden = false;
  #title = '';
  #waiters: Waiter[] = [];
  #disposed = false;

  constructor(ring: RingStream, options: TerminalScreenOptions) {
    this.#ring = ring;
    this.#answer = options.answerQueries;
    this.#maxCells = options.maxCells;
    this.#reply = options.reply;
    this.#sizes = [{ at: 0, rows: options.rows, cols: options.cols }];
  }

  /** Whether an emulator runs now. */
  get active(): boolean {
    return this.#term !== undefined;
  }

  /** Sees each chunk of output as it enters the ring, at `offset`: a query in it starts the emulator. */
  observe(chunk: Buffer, offset: number): void {
    if (this.#term !== undefined || !this.#answer || this.#disposed) return;
    // The chunk's own bytes are live: a query in them is answered, bytes before it are replayed.
    if (this.#scanner.scan(chunk)) this.#start(offset);
  }

  /** The terminal took a new size now, at the current end of its output. */
  resize(rows: number, cols: number): void {
    const at = this.#ring.end;
    const last = this.#sizes.at(-1);
    // Sizes taken with no output between them: only the last one counts.
    if (last?.at === at) this.#sizes[this.#sizes.length - 1] = { at, rows, cols };
    else this.#sizes.push({ at, rows, cols });
    if (this.#term === undefined) this.#pruneSizes();
    if (this.#sizes.length > MAX_PENDING_SIZES) {
      const [older, newer] = this.#sizes as [SizeMark, SizeMark];
      this.#sizes.splice(0, 2, { at: older.at, rows: newer.rows, cols: newer.cols });
      this.#sizesMerged = true;
      if (this.#term !== undefined) this.#complete = false;
    }
    this.#pump();
  }

  /**
   * The screen once every byte the terminal produced so far is parsed.
   * @throws {ServiceError} LIMIT_EXCEEDED when the terminal has more cells than a screen holds
   */
  snapshot(): Promise<ScreenSnapshot> {
    if (this.#disposed) return Promise.reject(new ServiceError('NOT_FOUND', 'the terminal was forgotten'));
    if (this.#term === undefined && !this.#start(this.#ring.end)) {
      const { rows, cols } = this.#sizes.at(-1)!;
      return Promise.reject(
        new ServiceError('LIMIT_EXCEEDED', `the terminal is ${rows}×${cols}, more than the ${this.#maxCells} cells a screen holds (--screen-max-cells)`),
      );
    }
    if (!this.#writing && this.#fed >= this.#ring.end) return Promise.resolve(this.#take());
    return new Promise((resolve, reject) => {
      this.#waiters.push({ target: this.#ring.end, resolve, reject });
      this.#pump();
    });
  }

  /** Releases the emulator; a snapshot still waiting fails. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#stop(() => new ServiceError('NOT_FOUND', 'the terminal was forgotten'));
  }

  /** Drops the size marks an emulator starting at the oldest retained byte would not need. */
  #pruneSizes(): void {
    const start = this.#ring.start;
    while (this.#sizes.length > 1 && this.#sizes[1]!.at <= start) this.#sizes.shift();
  }

  #fits(size: SizeMark): boolean {
    return size.rows * size.cols <= this.#maxCells;
  }

  /** Makes the emulator, reading from the oldest retained byte; bytes before `liveFrom` are replayed. False when the terminal is too large for one. */
  #start(liveFrom: number): boolean {
    if (this.#disposed) return false;
    this.#pruneSizes();
    // The emulator starts where every size from then on fits.
    let first = this.#sizes.length - 1;
    if (!this.#fits(this.#sizes[first]!)) return false;
    while (first > 0 && this.#fits(this.#sizes[first - 1]!)) first -= 1;
    const initial = this.#sizes[first]!;
    this.#sizes = this.#sizes.slice(first + 1);
    this.#origin = Math.max(this.#ring.start, initial.at);
    this.#complete = this.#origin === 0 && !this.#sizesMerged;
    this.#liveFrom = liveFrom;
    this.#fed = this.#origin;
    this.#cursorHidden = false;
    this.#title = '';
    const term = new xterm.Terminal({
      rows: initial.rows,
      cols: Math.max(MIN_EMULATOR_COLS, initial.cols),
      scrollback: 0,
      allowProposedApi: true,
      logLevel: 'off',
    });
    term.onData((data) => {
      if (!this.#muted) this.#reply(data);
    });
    term.onTitleChange((title) => (this.#title = title.slice(0, MAX_TITLE_LENGTH)));
    // Cursor visibility (DECTCEM, mode 25) is kept by the emulator but not exposed: followed here, the emulator still acting on each.
    term.parser.registerCsiHandler({ prefix: '?', final: 'h' }, (params) => {
      if (namesCursorMode(params)) this.#cursorHidden = false;
      return false;
    });
    term.parser.registerCsiHandler({ prefix: '?', final: 'l' }, (params) => {
      if (namesCursorMode(params)) this.#cursorHidden = true;
      return false;
    });
    // A full reset (RIS) and a soft reset (DECSTR) show the cursor again.
    term.parser.registerEscHandler({ final: 'c' }, () => {
      this.#cursorHidden = false;
      return false;
    });
    term.parser.registerCsiHandler({ intermediates: '!', final: 'p' }, () => {
      this.#cursorHidden = false;
      return false;
    });
    this.#term = term;
    this.#ring.holdFrom(this.#fed);
    this.#unlisten = this.#ring.onChange(() => this.#pump());
    this.#pump();
    return true;
  }

  /**
   * Ends the emulator (the session is forgotten, or the terminal grew past the
   * cells a screen holds); waiting snapshots fail with the error `failure`
   * makes, made only when one waits (an error's stack costs tens of µs, paid
   * by every terminal ended). A write in flight is let finish first: the
   * emulator is released once idle.
   */
  #stop(failure: () => ServiceError): void {
    const term = this.#term;
    if (term === undefined) return;
    this.#term = undefined;
    this.#unlisten?.();
    this.#unlisten = undefined;
    this.#ring.holdFrom(undefined);
    this.#scanner = new QueryScanner();
    if (!this.#writing) term.dispose();
    const waiters = this.#waiters.splice(0);
    if (waiters.length === 0) return;
    const error = failure();
    for (const waiter of waiters) waiter.reject(error);
  }

  /** Applies the size changes the emulator has reached, answers the snapshots it has caught up with, and hands it the next slice. */
  #pump(): void {
    const term = this.#term;
    if (term === undefined || this.#writing) return;
    while (this.#sizes.length > 0 && this.#sizes[0]!.at <= this.#fed) {
      const size = this.#sizes.shift()!;
      if (!this.#fits(size)) {
        // A screen that large is not kept; a smaller size later starts a new emulator from the retained output.
        this.#sizes.unshift(size);
        this.#stop(
          () => new ServiceError('LIMIT_EXCEEDED', `the terminal grew to ${size.rows}×${size.cols}, more than the ${this.#maxCells} cells a screen holds`),
        );
        return;
      }
      term.resize(Math.max(MIN_EMULATOR_COLS, size.cols), size.rows);
    }
    this.#settleWaiters();
    const ring = this.#ring;
    if (this.#fed >= ring.end) return;
    let until = Math.min(ring.end, this.#fed + BATCH_BYTES);
    const nextSize = this.#sizes[0];
    if (nextSize !== undefined && nextSize.at < until) until = nextSize.at;
    // Replayed and live bytes never share a write: the one mutes answers, the other does not.
    if (this.#fed < this.#liveFrom && this.#liveFrom < until) until = this.#liveFrom;
    const slice = ring.read(this.#fed, until - this.#fed);
    // The ring holds every byte from #fed; a gap would be a broken promise of that, and leaves the screen incomplete.
    if (slice.gap !== null) this.#complete = false;
    if (slice.data.length === 0) return;
    this.#muted = !this.#answer || slice.next <= this.#liveFrom;
    this.#writing = true;
    this.#fed = slice.next;
    this.#ring.holdFrom(this.#fed);
    term.write(slice.data, () => {
      this.#writing = false;
      if (this.#term !== term) {
        term.dispose();
        return;
      }
      this.#pump();
    });
  }

  #settleWaiters(): void {
    if (this.#waiters.length === 0) return;
    const ready = this.#waiters.filter((waiter) => waiter.target <= this.#fed);
    if (ready.length === 0) return;
    this.#waiters = this.#waiters.filter((waiter) => waiter.target > this.#fed);
    const snapshot = this.#take();
    for (const waiter of ready) waiter.resolve(snapshot);
  }

  /** The emulator's state now, with no write in flight: everything before #fed is parsed. */
  #take(): ScreenSnapshot {
    const term = this.#term!;
    const buffer = term.buffer.active;
    const lines: string[] = [];
    // Cells never written are trimmed by the emulator, written spaces here.
    for (let row = 0; row < term.rows; row += 1) lines.push((buffer.getLine(buffer.baseY + row)?.translateToString(true) ?? '').replace(TRAILING_SPACES, ''));
    return {
      offset: this.#fed,
      complete: this.#complete,
      rows: term.rows,
      cols: term.cols,
      lines,
      // Right after the last column the emulator's cursor waits to wrap; it is drawn on that column.
      cursor: { row: buffer.cursorY, col: Math.min(buffer.cursorX, term.cols - 1), visible: !this.#cursorHidden },
      alternate: buffer.type === 'alternate',
      title: this.#title,
    };
  }
}
