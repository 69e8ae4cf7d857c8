/**
 * Answers a terminal program's cursor position requests (CPR, `ESC [ 6 n`)
 * as a terminal would, between a harness backend and its seam provider.
 *
 * Why: .NET's console on Linux sends `ESC [ 6 n` whatever TERM says (the
 * sequence is built in, not read from terminfo), and pwsh asks before every
 * prompt and while it edits a line. Unanswered, the first request waits 10 s
 * and each later one 1 s, and input typed meanwhile is taken in by the wait.
 * dsh-terminal-bash 0.1.0-rc.8 answers no terminal request (its later design
 * puts a headless terminal emulator in the backend for this); the reference
 * provider and ours pass bytes through and answer none either. The pwsh tests
 * and benchmarks put this replier in front of every provider alike.
 *
 * The position is tracked roughly from the output (line breaks, carriage
 * returns, backspaces, printable characters, absolute cursor moves), which
 * is all that pwsh's line editor needs from it.
 */
import { Transform } from 'node:stream';
import type { SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@execworld/sdk/seam';

const ESC = 0x1b;

/** Tracks the cursor through output bytes and finds the CPR requests in them. */
export class CursorTracker {
  row = 0;
  col = 0;
  /** Bytes of an escape sequence not yet complete. */
  #pending: number[] = [];

  constructor(
    readonly cols: number,
    readonly rows: number,
  ) {}

  /** Feeds output; returns how many CPR requests it completed. */
  feed(bytes: Uint8Array): number {
    let requests = 0;
    for (const byte of bytes) {
      if (this.#pending.length > 0) {
        this.#pending.push(byte);
        if (this.#sequenceDone()) requests += this.#finish() ? 1 : 0;
        continue;
      }
      if (byte === ESC) this.#pending.push(byte);
      else this.#plain(byte);
    }
    return requests;
  }

  /** The reply a terminal gives to CPR now. */
  report(): string {
    return `\x1b[${this.row + 1};${this.col + 1}R`;
  }

  #plain(byte: number): void {
    if (byte === 0x0d) this.col = 0;
    else if (byte === 0x0a) this.row = Math.min(this.row + 1, this.rows - 1);
    else if (byte === 0x08) this.col = Math.max(this.col - 1, 0);
    // A printable character: ASCII, or the first byte of a UTF-8 sequence.
    else if ((byte >= 0x20 && byte < 0x7f) || byte >= 0xc0) {
      this.col += 1;
      if (this.col >= this.cols) {
        this.col = 0;
        this.row = Math.min(this.row + 1, this.rows - 1);
      }
    }
  }

  #sequenceDone(): boolean {
    const sequence = this.#pending;
    if (sequence.length < 2) return false;
    const kind = sequence[1];
    const last = sequence[sequence.length - 1]!;
    // CSI ends at a final byte; OSC at BEL or ESC \; any other ESC x is two bytes.
    if (kind === 0x5b) return sequence.length > 2 && last >= 0x40 && last <= 0x7e;
    if (kind === 0x5d) return last === 0x07 || (last === 0x5c && sequence[sequence.length - 2] === ESC);
    return true;
  }

  /** Applies the complete sequence; true when it was a CPR request. */
  #finish(): boolean {
    const text = String.fromCharCode(...this.#pending);
    this.#pending = [];
    if (text === '\x1b[6n') return true;
    const move = /^\[(\d*)(?:;(\d*))?[Hf]$/.exec(text.slice(1));
    if (move !== null) {
      this.row = Math.min(Math.max(Number(move[1] || 1) - 1, 0), this.rows - 1);
      this.col = Math.min(Math.max(Number(move[2] || 1) - 1, 0), this.cols - 1);
    }
    return false;
  }
}

/** The handle with its output scanned and each CPR request answered through `write`. */
export function answerCursorRequests(handle: SubprocessTerminalHandle, cols: number, rows: number): SubprocessTerminalHandle & { readonly answered: number } {
  const tracker = new CursorTracker(cols, rows);
  let answered = 0;
  const output = new Transform({
    transform(chunk: Buffer | string, _encoding, callback) {
      const requests = tracker.feed(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      for (let index = 0; index < requests; index += 1) {
        answered += 1;
        // A terminal that is gone has nobody left to answer.
        handle.write(tracker.report()).catch(() => undefined);
      }
      callback(null, chunk);
    },
  });
  handle.output.on('error', (error) => output.destroy(error));
  handle.output.pipe(output);
  return {
    pid: handle.pid,
    output,
    done: handle.done,
    write: (data) => handle.write(data),
    inspectForeground: () => handle.inspectForeground(),
    signalForeground: (signal) => handle.signalForeground(signal),
    terminate: () => handle.terminate(),
    get answered() {
      return answered;
    },
  };
}

/** `spawnTerminal` of a provider, with every terminal's CPR requests answered. */
export function spawnAnsweringCursorRequests(
  spawnTerminal: (spec: SubprocessTerminalSpawnSpec) => Promise<SubprocessTerminalHandle>,
): (spec: SubprocessTerminalSpawnSpec) => Promise<SubprocessTerminalHandle> {
  return async (spec) => answerCursorRequests(await spawnTerminal(spec), spec.cols, spec.rows);
}
