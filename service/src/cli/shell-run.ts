/**
 * A run in a shell of the daemon as the CLI shows it: its output as it comes,
 * and what to do with a shell whose command waits.
 *
 * The daemon answers a run only when it ended (or waits for input, or went
 * idle), with the output between the run's markers. Meanwhile the same bytes
 * pass through the shell's terminal, which any reader may follow: so the CLI
 * reads the terminal from where it stood before the run, skips to the run's
 * start marker, and writes out as text what follows, up to the end marker or
 * the shell's prompt marker (a line cut short). A few bytes are held back
 * while they could still become a marker, an escape sequence or a character.
 * The answer then says exactly where the run's output ended
 * (`outputEnd`), and the rest up to there is written out. Where the terminal
 * cannot be followed (the shell was started anew on another terminal, its
 * bytes were no longer kept), the answer's own output is written instead.
 * @module
 */
import { MAX_WAIT_MS } from '@execworld/sdk/seam';
import type { OperationResult } from '@execworld/sdk/protocol';
import { isExecworldError, type RemoteRuntime } from '@execworld/sdk';
import { renderTerminalText } from '@execworld/sdk/shell';
import { CliError } from './command.ts';

export type RunAnswer = OperationResult<'shell.run'>;

/**
 * The line `run --usage` and `exec --usage` print on stderr: one line of name=value fields in a
 * fixed order, bytes and milliseconds, `-` for none (docs/cli.md has it).
 */
export function usageLine(usage: RunAnswer['usage']): string {
  if (usage === undefined) return 'execworld: usage unknown: no cgroup counts this session (the daemon contains sessions without one)';
  return (
    `execworld: usage cpu_user_ms=${usage.cpuUserMs} cpu_system_ms=${usage.cpuSystemMs} ` +
    `peak_memory_bytes=${usage.peakMemoryBytes ?? '-'} peak_scope=${usage.peakScope} ` +
    `limit_hit=${usage.limitHit ?? '-'} oom_killed=${usage.oomKilled}`
  );
}

const START = /__EW_START_[A-Za-z0-9]+__\r?\n/;
const END = Buffer.from('__EW_END_', 'latin1');
/** OSC 133;D: the shell's prompt marker, printed when it is back at its prompt. */
const PROMPT = Buffer.from('\x1b]133;D;', 'latin1');
const ESC = 0x1b;
const CR = 0x0d;
const LF = 0x0a;
/** Bytes of output kept for the answer's end once a marker was seen: past them the answer's own output is written. */
const HELD_LIMIT = 4 * 1024 * 1024;

/** Whether `tail` is the beginning of `marker` (but not all of it): it may still become one. */
function beginsMarker(tail: Buffer, marker: Buffer): boolean {
  return tail.length < marker.length && marker.subarray(0, tail.length).equals(tail);
}

/** The index of an escape sequence at the end of `bytes[0, limit)` that is not complete yet, else `limit`. */
function beforeOpenEscape(bytes: Buffer, limit: number): number {
  const at = bytes.lastIndexOf(ESC, limit - 1);
  if (at === -1) return limit;
  const kind = bytes[at + 1];
  if (at + 1 >= limit || kind === undefined) return at;
  if (kind === 0x5b) {
    // CSI: complete at its final byte.
    for (let index = at + 2; index < limit; index += 1) if (bytes[index]! >= 0x40 && bytes[index]! <= 0x7e) return limit;
    return at;
  }
  if (kind === 0x5d || kind === 0x50 || kind === 0x5f || kind === 0x5e) {
    // OSC, DCS, APC, PM: complete at BEL or ST.
    for (let index = at + 2; index < limit; index += 1) {
      if (bytes[index] === 0x07 || (bytes[index] === ESC && bytes[index + 1] === 0x5c)) return limit;
    }
    return at;
  }
  return limit;
}

/** `limit` moved back before a UTF-8 character whose bytes did not all arrive. */
function beforeOpenCharacter(bytes: Buffer, limit: number): number {
  for (let back = 1; back <= 3 && back <= limit; back += 1) {
    const byte = bytes[limit - back]!;
    if ((byte & 0xc0) === 0x80) continue;
    const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return length > back ? limit - back : limit;
  }
  return limit;
}

/**
 * The run's output in a shell's terminal stream, written out as text while
 * it comes (see the module's comment).
 */
export class RunOutput {
  readonly #write: (text: string) => void;
  #state: 'seek-start' | 'body' | 'ended' | 'lost' | 'finished';
  /** Bytes not written yet, from stream offset `#at`. */
  #pending = Buffer.alloc(0);
  #at: number;
  /** Where the run's output began in the stream, once its start marker was seen. */
  #bodyStart: number | undefined;
  /** Something of the run was written. */
  #wrote = false;
  /** The command is being interrupted: a line end at the end of the output may be the shell's own, not the command's. */
  #holdLineEnds = false;
  /** Told how many bytes of the run's output the daemon dropped before they were read (see {@link push}). */
  readonly #onDropped: (bytes: number) => void;

  /**
   * @param from - the stream offset reading starts at
   * @param seekStart - the run starts with its start marker (a new run), or is under way (its output goes on at `from`)
   */
  constructor(from: number, seekStart: boolean, write: (text: string) => void, onDropped: (bytes: number) => void = () => undefined) {
    this.#at = from;
    this.#write = write;
    this.#onDropped = onDropped;
    this.#state = seekStart ? 'seek-start' : 'body';
    if (!seekStart) this.#bodyStart = from;
  }

  /** The stream offset after the last byte taken. */
  get position(): number {
    return this.#at + this.#pending.length;
  }

  /**
   * The command is being interrupted: from now on a line end is written only
   * once more output follows it (or the answer says it was the command's), since
   * the shell ends a line cut short with one of its own.
   */
  holdLineEnds(): void {
    this.#holdLineEnds = true;
  }

  /**
   * Takes the stream's next bytes, at `offset`. Bytes the daemon no longer kept
   * (`offset` past the position: its ring moved on while the machine was too
   * busy for this reader) are said to be dropped, once the run's output was
   * under way, and the output goes on after them; before the run's start was
   * seen they lose the stream (the answer's own output is written instead).
   */
  push(chunk: Buffer, offset: number): void {
    // A read still in flight when the answer was written out (the stream's or the answer's own) writes nothing.
    if (this.#state === 'lost' || this.#state === 'finished') return;
    if (offset > this.position && this.#state === 'body') {
      const dropped = offset - this.position;
      this.#emit(this.#pending.length);
      this.#drop(this.#pending.length);
      this.#at = offset;
      this.#onDropped(dropped);
    } else if (offset !== this.position) {
      this.#state = 'lost';
      return;
    }
    this.#pending = Buffer.concat([this.#pending, chunk]);
    if (this.#state === 'seek-start') {
      const match = START.exec(this.#pending.toString('latin1'));
      if (match === null) {
        // Only the tail can hold the beginning of a marker.
        this.#drop(Math.max(0, this.#pending.length - 64));
        return;
      }
      this.#drop(match.index + match[0].length);
      this.#bodyStart = this.#at;
      this.#state = 'body';
    }
    if (this.#state === 'body') this.#writeSafe();
    else if (this.#state === 'ended' && this.#pending.length > HELD_LIMIT) this.#state = 'lost';
  }

  /**
   * Writes the rest of the run's output, up to `answer.outputEnd`, once the
   * stream reached it; the answer's own output when the stream could not be
   * followed. False while the stream has not reached the end yet.
   */
  finish(answer: RunAnswer, followed: string | null): boolean {
    const same = followed !== null && answer.terminalId === followed && this.#state !== 'lost' && this.#bodyStart !== undefined;
    if (!same || (!this.#wrote && answer.outputStart !== this.#bodyStart)) {
      if (!this.#wrote) this.#write(answer.output);
      this.#state = 'finished';
      return true;
    }
    if (this.position < answer.outputEnd) return false;
    if (answer.outputEnd > this.#at) this.#emit(answer.outputEnd - this.#at);
    this.#state = 'finished';
    return true;
  }

  /** Writes what cannot be a marker, an escape sequence cut short or a character cut short. */
  #writeSafe(): void {
    const pending = this.#pending;
    const end = pending.indexOf(END);
    let prompt = pending.indexOf(PROMPT);
    if (end !== -1 || prompt !== -1) {
      // Output stops here; the answer says where exactly.
      if (prompt !== -1 && (end === -1 || prompt < end)) {
        // The shell ends a line cut short with a line end of its own.
        if (pending[prompt - 1] === LF) prompt -= pending[prompt - 2] === CR ? 2 : 1;
        this.#emit(Math.max(0, prompt));
      } else {
        this.#emit(end);
      }
      this.#state = 'ended';
      return;
    }
    let limit = pending.length;
    for (let index = Math.max(0, pending.length - PROMPT.length); index < pending.length; index += 1) {
      const tail = pending.subarray(index);
      if (beginsMarker(tail, END) || beginsMarker(tail, PROMPT)) {
        limit = index;
        break;
      }
    }
    limit = beforeOpenEscape(pending, limit);
    limit = beforeOpenCharacter(pending, limit);
    // A CR may be the first half of a CRLF, one line end.
    if (limit > 0 && pending[limit - 1] === CR) limit -= 1;
    while (this.#holdLineEnds && limit > 0 && (pending[limit - 1] === LF || pending[limit - 1] === CR)) limit -= 1;
    this.#emit(limit);
  }

  #emit(count: number): void {
    if (count <= 0) return;
    const text = renderTerminalText(this.#pending.subarray(0, count));
    this.#drop(count);
    if (text.length === 0) return;
    this.#wrote = true;
    this.#write(text);
  }

  #drop(count: number): void {
    this.#pending = this.#pending.subarray(count);
    this.#at += count;
  }
}

/**
 * Makes one call of a shell's run (`run`, or `send` to a run under way) and
 * writes its output as it comes; resolves with the call's answer once all of
 * its output was written. `interrupting` aborts when the caller interrupts
 * the command (see {@link RunOutput.holdLineEnds}).
 */
export async function streamRun(
  runtime: RemoteRuntime,
  shellId: string,
  kind: 'run' | 'continue',
  call: () => Promise<RunAnswer>,
  write: (text: string) => void,
  interrupting?: AbortSignal,
  onDropped: (bytes: number) => void = (bytes) => {
    process.stderr.write(`execworld: ${bytes} bytes of the output were dropped before they could be shown (the daemon keeps a terminal's last bytes only)\n`);
  },
): Promise<RunAnswer> {
  const { terminalId } = await runtime.call('shell.get', { id: shellId });
  let output: RunOutput | undefined;
  let reading: Promise<void> = Promise.resolve();
  let stopped = false;
  /** Wakes the wait for the stream to reach the answer's end. */
  let progressed: () => void = () => undefined;
  if (terminalId !== null) {
    try {
      const from = (await runtime.call('terminal.get', { id: terminalId })).output.end;
      const follower = new RunOutput(from, kind === 'run', write, onDropped);
      output = follower;
      if (interrupting?.aborted === true) follower.holdLineEnds();
      else interrupting?.addEventListener('abort', () => follower.holdLineEnds(), { once: true });
      reading = (async () => {
        while (!stopped) {
          const read = await runtime.call('terminal.output', { id: terminalId, from: follower.position, waitMs: MAX_WAIT_MS });
          follower.push(Buffer.from(read.data, 'base64'), read.from);
          progressed();
          if (read.ended) return;
        }
      })();
      reading.catch(() => undefined);
    } catch (_error) {
      // The terminal is gone already: the answer's own output is written.
    }
  }
  try {
    const answer = await call();
    if (output === undefined) {
      write(answer.output);
      return answer;
    }
    // Once the reading stopped short of the answer's end (the connection failed), the answer's own output is written.
    let stoppedShort = false;
    const settled = (): void => {
      stoppedShort = output.position < answer.outputEnd;
    };
    reading.then(settled, settled);
    while (!output.finish(answer, stoppedShort ? null : terminalId)) {
      await new Promise<void>((resolve) => {
        progressed = resolve;
        reading.then(resolve, resolve);
      });
    }
    return answer;
  } finally {
    stopped = true;
    progressed = () => undefined;
  }
}

/**
 * SIGINT to the command shell `id` runs, as Ctrl-C on its terminal would:
 * the daemon interrupts the run this CLI's call waits for, which answers
 * `canceled` (the daemon follows a signal the shell itself took to the
 * command it starts next, and ends a shell that does not come back).
 */
export async function interruptCommand(runtime: RemoteRuntime, id: string, answered: () => boolean = () => false): Promise<RunAnswer> {
  // The CLI's run call may not have reached the shell yet (it first reads where the terminal's output is): the
  // interrupt is asked again, while the shell has no command, until the call did or was answered.
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await runtime.call('shell.interrupt', { id });
    } catch (error) {
      if (!isExecworldError(error) || error.code !== 'INVALID_ARGUMENT' || answered() || attempt >= INTERRUPT_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, INTERRUPT_PAUSE_MS));
    }
  }
}

/** How often, and how far apart, an interrupt is asked again while the run it is for has not reached the shell. */
const INTERRUPT_ATTEMPTS = 250;
const INTERRUPT_PAUSE_MS = 20;

/** The commands that answer, interrupt or end a shell whose command waits. */
export function openRunHint(id: string): string {
  return `answer it with 'execworld send ${id} <text>', interrupt it with 'execworld interrupt ${id}', or end the shell with 'execworld kill ${id}'`;
}

/**
 * Nothing for an answer whose command ended; for one whose command still runs
 * (it waits for input or went idle), the line that says so and what to do.
 * @throws {CliError} for a command that waits
 */
export function assertEnded(answer: RunAnswer, id: string): void {
  if (answer.reason !== 'waiting_for_input' && answer.reason !== 'idle_timeout') return;
  const what =
    answer.reason === 'waiting_for_input' ? `waits for input${answer.waitingFor?.command === undefined ? '' : ` (${answer.waitingFor.command})`}` : 'went idle';
  throw new CliError(`${answer.reason.toUpperCase()}: the command ${what}; shell ${id} keeps it: ${openRunHint(id)}`);
}

/** SHELL_BUSY in the CLI's words: which commands answer the waiting command. */
export function shellBusy(error: unknown, id: string): unknown {
  if (!isExecworldError(error) || error.code !== 'SHELL_BUSY') return error;
  return new CliError(`SHELL_BUSY: shell ${id} still runs a command (it waits for input, went idle, or another call runs it): ${openRunHint(id)}`);
}
