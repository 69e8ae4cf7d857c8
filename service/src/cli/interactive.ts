/**
 * Using a terminal of the daemon from this one, as if it were local: this
 * terminal in raw mode (so Ctrl-C, Ctrl-Z and every other key reach the
 * program), the program's output on stdout, its window size following this
 * one's, and a detach key sequence that leaves it running.
 *
 * What a reattach shows is the caller's choice (see `attach.ts`): this module
 * shows whatever the handle's output stream delivers, from the offset it was
 * opened at.
 * @module
 */
import { finished } from 'node:stream/promises';
import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import { isExecworldError, type RemoteTerminal, type SessionLimits, type SubprocessOutcome } from '@execworld/sdk';
import { exitStatus, GRACE_MS } from './client.ts';
import type { Where } from './command.ts';

/** The detach key sequence, as docker spells it. */
export const DETACH_KEYS = 'Ctrl-P Ctrl-Q';
const CTRL_P = 0x10;
const CTRL_Q = 0x11;

/**
 * Finds Ctrl-P Ctrl-Q in what is typed. A Ctrl-P is held back until the next
 * byte says whether it starts the sequence: then the two detach and are not
 * sent, otherwise the Ctrl-P is sent with that byte (so a program sees a lone
 * Ctrl-P only with the key after it, as under docker).
 */
export class DetachKeys {
  #held = false;

  /** The bytes of `chunk` to send, and whether the sequence was typed (what follows it in the chunk is dropped). */
  feed(chunk: Uint8Array): { send: Buffer; detach: boolean } {
    if (!this.#held && !chunk.includes(CTRL_P)) return { send: Buffer.from(chunk), detach: false };
    const send: number[] = [];
    for (const byte of chunk) {
      if (this.#held) {
        this.#held = false;
        if (byte === CTRL_Q) return { send: Buffer.from(send), detach: true };
        send.push(CTRL_P);
      }
      if (byte === CTRL_P) this.#held = true;
      else send.push(byte);
    }
    return { send: Buffer.from(send), detach: false };
  }

  /** At the end of input: the Ctrl-P still held, if any. */
  flush(): Buffer {
    const held = this.#held;
    this.#held = false;
    return held ? Buffer.of(CTRL_P) : Buffer.alloc(0);
  }
}

/** This terminal's size, when stdout is one. */
function localSize(): { rows: number; cols: number } | undefined {
  const out = process.stdout;
  return out.isTTY && out.rows > 0 && out.columns > 0 ? { rows: out.rows, cols: out.columns } : undefined;
}

/** The size a new terminal starts at: this terminal's, or 24x80 when stdout is not a terminal. */
export function initialSize(): { rows: number; cols: number } {
  return localSize() ?? { rows: 24, cols: 80 };
}

/** The environment entries a new terminal takes from this one: its TERM, which says what this terminal understands. */
export function terminalEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return env.TERM === undefined || env.TERM === '' ? {} : { TERM: env.TERM };
}

/**
 * The create of a terminal for `argv` run from this one: where and as whom it
 * runs, this terminal's TERM with `env`'s entries over it, this terminal's
 * size, the CLI's grace, and the limits of its session where any is asked.
 */
export function terminalSpec(argv: readonly string[], where: Where, env: Record<string, string> | undefined, limits: SessionLimits = {}) {
  return {
    argv: [...argv],
    ...where,
    env: { ...terminalEnv(), ...env },
    ...initialSize(),
    graceMs: GRACE_MS,
    ...(Object.keys(limits).length === 0 ? {} : { limits }),
  };
}

/** The program no longer takes input: its terminal exited or was closed. */
const isEnded = (error: unknown): boolean => isExecworldError(error) && (error.code === 'TERMINAL_EXITED' || error.code === 'TERMINAL_CLOSED');

/** Longest write sent at once, in UTF-16 units (the daemon takes 1 MiB a call). */
const MAX_WRITE_UNITS = 64 * 1024;
/** Input queued while a write is in flight before this terminal's stdin is paused. */
const QUEUE_HIGH_WATER_UNITS = 1024 * 1024;
/** Wait before a write the daemon refused for a program that does not read yet is tried again. */
const BACKLOG_RETRY_MS = 100;

/**
 * Typed input on its way to the terminal: one write in flight at a time, so
 * order is kept whatever happens to the connection, and what is typed
 * meanwhile goes together in the next one. Bytes are decoded as UTF-8 (the
 * daemon's terminal input is text), a character split across reads included.
 */
class TerminalInput {
  readonly #terminal: RemoteTerminal;
  readonly #fail: (error: unknown) => void;
  readonly #decoder = new StringDecoder('utf8');
  readonly #idle = new Set<() => void>();
  #queued = '';
  #sending = false;
  #paused = false;

  constructor(terminal: RemoteTerminal, fail: (error: unknown) => void) {
    this.#terminal = terminal;
    this.#fail = fail;
  }

  push(bytes: Buffer): void {
    this.#queued += this.#decoder.write(bytes);
    this.#pump();
  }

  end(): void {
    this.#queued += this.#decoder.end();
    this.#pump();
  }

  /** Resolves once everything pushed was written, or dropped because the terminal takes no more input. */
  idle(): Promise<void> {
    if (!this.#sending && this.#queued === '') return Promise.resolve();
    return new Promise((resolve) => this.#idle.add(resolve));
  }

  #pump(): void {
    if (this.#sending) return;
    if (this.#queued === '') {
      if (this.#paused) {
        this.#paused = false;
        process.stdin.resume();
      }
      for (const resolve of this.#idle) resolve();
      this.#idle.clear();
      return;
    }
    let size = Math.min(MAX_WRITE_UNITS, this.#queued.length);
    // Never split a surrogate pair between two writes.
    const last = this.#queued.charCodeAt(size - 1);
    if (size < this.#queued.length && last >= 0xd800 && last <= 0xdbff) size -= 1;
    const data = this.#queued.slice(0, size);
    this.#queued = this.#queued.slice(size);
    if (this.#queued.length > QUEUE_HIGH_WATER_UNITS && !this.#paused) {
      this.#paused = true;
      process.stdin.pause();
    }
    this.#sending = true;
    this.#terminal
      .write(data)
      .catch(async (error: unknown) => {
        if (isEnded(error)) {
          // As on a terminal whose program is gone: what is typed goes nowhere.
          this.#queued = '';
        } else if (isExecworldError(error) && error.code === 'LIMIT_EXCEEDED') {
          // The program has not read what waits for it yet: the same bytes again, shortly.
          this.#queued = data + this.#queued;
          await sleep(BACKLOG_RETRY_MS);
        } else {
          this.#queued = '';
          this.#fail(error);
        }
      })
      .finally(() => {
        this.#sending = false;
        this.#pump();
      });
  }
}

export interface InteractOptions {
  /** Whether Ctrl-P Ctrl-Q detaches, leaving the terminal running. */
  readonly detachable: boolean;
  /**
   * What SIGHUP, SIGTERM and SIGINT sent to this command do (SIGHUP: the
   * terminal it runs in went away): detach, leaving the terminal running, or
   * end the terminal and wait for its program's outcome.
   */
  readonly onSignal: 'detach' | 'terminate';
}

export type InteractEnd = { readonly detached: true } | { readonly detached: false; readonly outcome: SubprocessOutcome };

/**
 * Connects this terminal to `terminal` until its program exits (resolving
 * with the outcome, after the last byte of output was written) or the user
 * detaches. This terminal's modes are restored either way.
 */
export async function interact(terminal: RemoteTerminal, options: InteractOptions): Promise<InteractEnd> {
  const stdin = process.stdin;
  const stdout = process.stdout;
  const raw = stdin.isTTY;
  if (raw) stdin.setRawMode(true);
  const cleanups: (() => void)[] = [];
  try {
    return await new Promise<InteractEnd>((resolve, reject) => {
      let settled = false;
      const settle = (end: InteractEnd | { error: Error }): void => {
        if (settled) return;
        settled = true;
        if ('error' in end) reject(end.error);
        else resolve(end);
      };
      const fail = (error: unknown): void => settle({ error: error instanceof Error ? error : new Error(String(error)) });
      const input = new TerminalInput(terminal, fail);
      // Whatever was typed before the detach keys is written first.
      const detach = (): void => void input.idle().then(() => settle({ detached: true }));

      const output = terminal.output;
      output.on('error', fail);
      output.pipe(stdout, { end: false });
      cleanups.push(() => output.unpipe(stdout));
      // The outcome, once the last byte of output went on to stdout.
      Promise.all([terminal.done, finished(output)]).then(([outcome]) => settle({ detached: false, outcome }), fail);

      const keys = options.detachable ? new DetachKeys() : undefined;
      const onData = (chunk: Buffer): void => {
        if (settled) return;
        if (keys === undefined) return input.push(chunk);
        const { send, detach: now } = keys.feed(chunk);
        if (send.length > 0) input.push(send);
        if (now) detach();
      };
      const onEnd = (): void => {
        // A terminal has no end of input to pass on: what was typed is sent, and the program runs on.
        if (keys !== undefined) input.push(keys.flush());
        input.end();
      };
      stdin.on('data', onData);
      stdin.once('end', onEnd);
      cleanups.push(() => {
        stdin.off('data', onData);
        stdin.off('end', onEnd);
        stdin.pause();
      });

      if (stdout.isTTY) {
        const onResize = (): void => {
          const size = localSize();
          if (size === undefined) return;
          terminal.resize(size.cols, size.rows).catch((error: unknown) => {
            if (!isEnded(error)) fail(error);
          });
        };
        // At once too: a terminal attached to takes this terminal's size.
        onResize();
        stdout.on('resize', onResize);
        cleanups.push(() => stdout.off('resize', onResize));
      }

      const onSignal = (): void => {
        if (options.onSignal === 'detach') return detach();
        // The outcome follows through done.
        terminal.terminate().catch(fail);
      };
      for (const signal of ['SIGHUP', 'SIGTERM', 'SIGINT'] as const) {
        process.on(signal, onSignal);
        cleanups.push(() => process.off(signal, onSignal));
      }
    });
  } finally {
    for (const cleanup of cleanups.reverse()) cleanup();
    if (raw) stdin.setRawMode(false);
  }
}

/**
 * Escape sequences that put back what a program may have left set in this
 * terminal when it is detached from mid-run: attributes, a hidden cursor,
 * application cursor keys, bracketed paste and mouse reporting. (Whether it
 * was in the alternate screen is not known without a screen model; `reset`
 * leaves it.)
 */
const RESTORE_MODES = '\x1b[0m\x1b[?25h\x1b[?1l\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l';

/**
 * `interact` for the commands that attach (`attach`, `shell`): detachable,
 * and detached by a signal. Resolves with the exit status: the program's, or
 * 0 after a detach, which prints how to resume.
 */
export async function attachAndWait(terminal: RemoteTerminal): Promise<number> {
  const end = await interact(terminal, { detachable: true, onSignal: 'detach' });
  if (!end.detached) return exitStatus(end.outcome);
  if (process.stdout.isTTY) process.stdout.write(RESTORE_MODES);
  process.stderr.write(`\r\nexecworld: detached from ${terminal.id}, which runs on; resume with: execworld attach ${terminal.id}\r\n`);
  return 0;
}
