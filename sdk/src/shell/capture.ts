/**
 * One run's view of the shell's output: finds the run's start marker, then
 * collects the command's bytes until its end marker (with the exit status) or
 * the prompt marker of a line that was cut short (an interrupt), keeping at
 * most a bounded head and tail of them.
 * @module
 */
import { endMarker, promptMarkerPrefix, promptMarkerSuffix, startMarker } from './dialect.ts';
import { renderTerminalText } from './render.ts';

/** How a run's command line ended, as its markers say. */
export interface LineEnd {
  /** The exit status the end marker or the prompt marker carried. */
  readonly status: number;
  /** Through the prompt marker: the line was cut short before its end marker. */
  readonly cutShort: boolean;
}

/** Bytes of a run, the head kept whole and the tail as a bounded window, with the count cut between. */
class BoundedBytes {
  readonly #half: number;
  /** Its state, for {@link RunCapture.snapshot}. */
  get state(): { head: Buffer; tail: Buffer; cut: number } {
    return { head: Buffer.concat(this.#head), tail: Buffer.concat(this.#tail), cut: this.#cut };
  }

  /** Takes a state of {@link state}. */
  restore(state: { head: Buffer; tail: Buffer; cut: number }): void {
    this.#head = state.head.length === 0 ? [] : [state.head];
    this.#headBytes = state.head.length;
    this.#tail = state.tail.length === 0 ? [] : [state.tail];
    this.#tailBytes = state.tail.length;
    this.#cut = state.cut;
  }

  #head: Buffer[] = [];
  #headBytes = 0;
  #tail: Buffer[] = [];
  #tailBytes = 0;
  #cut = 0;
  readonly #rows: number | undefined;

  /** @param rows - the terminal's height, when known (see renderTerminalText) */
  constructor(maxBytes: number, rows: number | undefined) {
    this.#half = Math.max(1, Math.floor(maxBytes / 2));
    this.#rows = rows;
  }

  get cut(): number {
    return this.#cut;
  }

  append(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (this.#headBytes < this.#half && this.#cut === 0 && this.#tailBytes === 0) {
      const room = this.#half - this.#headBytes;
      const head = chunk.subarray(0, room);
      this.#head.push(head);
      this.#headBytes += head.length;
      chunk = chunk.subarray(head.length);
      if (chunk.length === 0) return;
    }
    this.#tail.push(chunk);
    this.#tailBytes += chunk.length;
    while (this.#tailBytes > this.#half) {
      const first = this.#tail[0]!;
      const excess = this.#tailBytes - this.#half;
      if (first.length <= excess) {
        this.#tail.shift();
        this.#tailBytes -= first.length;
        this.#cut += first.length;
      } else {
        this.#tail[0] = first.subarray(excess);
        this.#tailBytes -= excess;
        this.#cut += excess;
      }
    }
  }

  /**
   * The text kept, with a line naming the bytes cut between head and tail.
   * `carry` is the unfinished line the previous answer ended with: rendered
   * again before these bytes, so that a redraw of it (a line editor echoing a
   * reply) shows what the terminal shows; what the previous answer already
   * gave of it is not given again.
   * @returns the text and the unfinished line these bytes end with
   */
  render(carry: Carry): { text: string; carry: Carry } {
    const head = Buffer.concat([carry.bytes, ...this.#head]);
    const tail = Buffer.concat(this.#tail);
    const last = this.#cut === 0 ? Buffer.concat([head, tail]) : tail;
    const rendered = renderTerminalText(this.#cut === 0 ? last : head, this.#rows);
    const text = carry.text !== '' && rendered.startsWith(carry.text) ? rendered.slice(carry.text.length) : rendered;
    const lineStart = last.lastIndexOf(0x0a) + 1;
    const unfinished = last.subarray(lineStart);
    const next: Carry =
      unfinished.length === 0 || unfinished.length > MAX_CARRY_BYTES
        ? NO_CARRY
        : { bytes: Buffer.from(unfinished), text: renderTerminalText(unfinished, this.#rows) };
    if (this.#cut === 0) return { text, carry: next };
    return { text: `${text}\n[… ${this.#cut} bytes of output cut …]\n${renderTerminalText(tail, this.#rows)}`, carry: next };
  }
}

/** An answer's unfinished last line: its bytes, and the text the answer gave of it. */
interface Carry {
  readonly bytes: Buffer;
  readonly text: string;
}
const NO_CARRY: Carry = { bytes: Buffer.alloc(0), text: '' };
/** Longest unfinished line carried into the next answer; a longer one is given as it was. */
const MAX_CARRY_BYTES = 64 * 1024;

type State = 'seek-start' | 'start-line' | 'body' | 'ended';

/** A capture's whole state, bytes in base64: what a daemon's takeover hands to its next image for a run still open. */
export interface CaptureSnapshot {
  readonly runNonce: string;
  readonly sessionNonce: string;
  readonly maxBytes: number;
  readonly rows?: number | undefined;
  readonly state: State;
  readonly pending: string;
  readonly pendingAt: number;
  readonly head: string;
  readonly tail: string;
  readonly cut: number;
  readonly outputStart: number;
  readonly lineEnd?: LineEnd | undefined;
  readonly carry: { readonly bytes: string; readonly text: string };
}

export class RunCapture {
  readonly #runNonce: string;
  readonly #sessionNonce: string;
  readonly #start: Buffer;
  readonly #end: Buffer;
  readonly #promptPrefix = Buffer.from(promptMarkerPrefix, 'latin1');
  readonly #promptSuffix: Buffer;
  /** Longest marker: bytes held back at a chunk's end, since a marker may go on in the next one. */
  readonly #holdBack: number;
  readonly #maxBytes: number;
  #state: State = 'seek-start';
  /** Bytes not yet taken: the held-back end of the previous chunks, then the new chunk. */
  #pending: Buffer = Buffer.alloc(0);
  /** Stream offset of `#pending`'s first byte. */
  #pendingAt: number;
  #bytes: BoundedBytes;
  /** Stream offset of the first byte of the output not yet answered. */
  #outputStart: number;
  #lineEnd: LineEnd | undefined;
  /** The unfinished line the previous answer ended with. */
  #carry: Carry = NO_CARRY;
  readonly #rows: number | undefined;

  /**
   * @param from - the stream offset of the first byte this run may see (the write of its line).
   * @param rows - the terminal's height, when known: absolute cursor rows follow its scrolling
   */
  constructor(runNonce: string, sessionNonce: string, from: number, maxBytes: number, rows?: number) {
    this.#rows = rows;
    this.#runNonce = runNonce;
    this.#sessionNonce = sessionNonce;
    this.#start = Buffer.from(startMarker(runNonce), 'latin1');
    this.#end = Buffer.from(endMarker(runNonce), 'latin1');
    this.#promptSuffix = Buffer.from(promptMarkerSuffix(sessionNonce), 'latin1');
    // The end marker's status (at most 3 digits) and line end, or a prompt marker's status and suffix.
    this.#holdBack = Math.max(this.#start.length, this.#end.length + 5, this.#promptPrefix.length + 4 + this.#promptSuffix.length);
    this.#maxBytes = maxBytes;
    this.#bytes = new BoundedBytes(maxBytes, rows);
    this.#pendingAt = from;
    this.#outputStart = from;
  }

  /** Everything the capture holds, to be taken up by {@link restore} in another process. */
  snapshot(): CaptureSnapshot {
    const bytes = this.#bytes.state;
    return {
      runNonce: this.#runNonce,
      sessionNonce: this.#sessionNonce,
      maxBytes: this.#maxBytes,
      ...(this.#rows === undefined ? {} : { rows: this.#rows }),
      state: this.#state,
      pending: this.#pending.toString('base64'),
      pendingAt: this.#pendingAt,
      head: bytes.head.toString('base64'),
      tail: bytes.tail.toString('base64'),
      cut: bytes.cut,
      outputStart: this.#outputStart,
      ...(this.#lineEnd === undefined ? {} : { lineEnd: this.#lineEnd }),
      carry: { bytes: this.#carry.bytes.toString('base64'), text: this.#carry.text },
    };
  }

  /** The capture a {@link snapshot} was taken of, going on from where it was. */
  static restore(snapshot: CaptureSnapshot): RunCapture {
    const capture = new RunCapture(snapshot.runNonce, snapshot.sessionNonce, snapshot.pendingAt, snapshot.maxBytes, snapshot.rows);
    capture.#state = snapshot.state;
    capture.#pending = Buffer.from(snapshot.pending, 'base64');
    capture.#pendingAt = snapshot.pendingAt;
    capture.#bytes.restore({ head: Buffer.from(snapshot.head, 'base64'), tail: Buffer.from(snapshot.tail, 'base64'), cut: snapshot.cut });
    capture.#outputStart = snapshot.outputStart;
    capture.#lineEnd = snapshot.lineEnd;
    const carry = Buffer.from(snapshot.carry.bytes, 'base64');
    capture.#carry = carry.length === 0 && snapshot.carry.text === '' ? NO_CARRY : { bytes: carry, text: snapshot.carry.text };
    return capture;
  }

  /** The run's start marker was seen: the shell took its line. */
  get started(): boolean {
    return this.#state !== 'seek-start';
  }

  /** How the line ended, once it did. */
  get lineEnd(): LineEnd | undefined {
    return this.#lineEnd;
  }

  /** Takes the next chunk of the shell's output, at stream offset `at`. */
  push(chunk: Buffer, at: number): void {
    if (this.#state === 'ended') return;
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    if (this.#pending.length === chunk.length) this.#pendingAt = at;
    this.#scan();
  }

  /**
   * The output since the previous answer, and its offsets; from then on the
   * next answer starts after it. Bytes held back for a marker are included
   * only when `all` (the output has stopped: a wait, an exit).
   */
  take(all: boolean): { output: string; truncated: boolean; outputStart: number; outputEnd: number } {
    if (all && this.#state === 'body') {
      this.#bytes.append(this.#pending);
      this.#pendingAt += this.#pending.length;
      this.#pending = Buffer.alloc(0);
    }
    const { text: output, carry } = this.#bytes.render(this.#carry);
    this.#carry = carry;
    const truncated = this.#bytes.cut > 0;
    const outputStart = this.#outputStart;
    const outputEnd = this.#state === 'body' || this.#state === 'ended' ? this.#pendingAt : outputStart;
    this.#bytes = new BoundedBytes(this.#maxBytes, this.#rows);
    this.#outputStart = outputEnd;
    return { output, truncated, outputStart, outputEnd };
  }

  #scan(): void {
    for (;;) {
      const pending = this.#pending;
      if (this.#state === 'seek-start') {
        const at = pending.indexOf(this.#start);
        if (at === -1) {
          this.#keep(Math.max(0, pending.length - this.#start.length + 1), false);
          return;
        }
        this.#keep(at + this.#start.length, false);
        this.#state = 'start-line';
        continue;
      }
      if (this.#state === 'start-line') {
        // The start marker's line end: CRLF from a terminal, LF from elsewhere.
        let skip = 0;
        if (pending[0] === 0x0d) skip = 1;
        if (skip === 1 && pending.length < 2) return;
        if (pending[skip] === 0x0a) skip += 1;
        else if (pending.length <= skip) return;
        this.#keep(skip, false);
        this.#outputStart = this.#pendingAt;
        this.#state = 'body';
        continue;
      }
      if (this.#state !== 'body') return;
      const end = pending.indexOf(this.#end);
      const prompt = this.#findPrompt(pending, end === -1 ? pending.length : end);
      if (end === -1 && prompt === undefined) {
        this.#keep(Math.max(0, pending.length - this.#holdBack), true);
        return;
      }
      if (prompt !== undefined && (end === -1 || prompt.at < end)) {
        if (prompt.status === undefined) {
          // Not all of it arrived yet.
          this.#keep(prompt.at, true);
          return;
        }
        // The shell ends a line cut short with a line end of its own before its prompt.
        const own = pending[prompt.at - 1] === 0x0a ? (pending[prompt.at - 2] === 0x0d ? 2 : 1) : 0;
        this.#finish(prompt.at - own, { status: prompt.status, cutShort: true });
        return;
      }
      const match = /^(\d{1,3})\r?\n/.exec(pending.toString('latin1', end + this.#end.length, end + this.#end.length + 6));
      if (match === null) {
        if (pending.length - (end + this.#end.length) < 5) {
          this.#keep(end, true);
          return;
        }
        // Not this run's marker after all (its status is missing): the bytes are output.
        this.#keep(end + this.#end.length, true);
        continue;
      }
      this.#finish(end, { status: Number(match[1]), cutShort: false });
      return;
    }
  }

  /** The earliest prompt marker of this session before `limit`, with its status once complete. */
  #findPrompt(pending: Buffer, limit: number): { at: number; status: number | undefined } | undefined {
    let from = 0;
    for (;;) {
      const at = pending.indexOf(this.#promptPrefix, from);
      if (at === -1 || at >= limit) return undefined;
      const rest = pending.toString('latin1', at + this.#promptPrefix.length, at + this.#promptPrefix.length + 4 + this.#promptSuffix.length);
      const match = /^(\d{1,3})/.exec(rest);
      const suffix = this.#promptSuffix.toString('latin1');
      if (match !== null && rest.startsWith(suffix, match[1]!.length)) return { at, status: Number(match[1]) };
      // Incomplete: wait for more unless it can no longer be ours.
      const seen = rest.length;
      const possible = match === null ? seen === 0 : suffix.startsWith(rest.slice(match[1]!.length));
      if (possible && at + this.#promptPrefix.length + seen === pending.length) return { at, status: undefined };
      from = at + 1;
    }
  }

  /** Drops (or, in the body, collects) the first `count` pending bytes. */
  #keep(count: number, collect: boolean): void {
    if (count <= 0) return;
    if (collect) this.#bytes.append(this.#pending.subarray(0, count));
    this.#pending = this.#pending.subarray(count);
    this.#pendingAt += count;
  }

  #finish(at: number, lineEnd: LineEnd): void {
    this.#keep(at, true);
    this.#lineEnd = lineEnd;
    this.#state = 'ended';
    this.#pending = Buffer.alloc(0);
  }
}
