/**
 * `PersistentShell`: a shell on a terminal of any seam runtime (local or
 * remote) that runs one command at a time and answers with its output and
 * exact exit status. cwd, variables and functions persist between runs.
 *
 * Readiness is driven by events, not a fixed poll: the run's end marker (its
 * status), the prompt marker of a line cut short (an interrupt), the shell's
 * exit, and the runtime's proof that a program of the command waits for
 * input, which is asked for when the output goes quiet (soon after, then
 * backing off) and never while output flows.
 *
 * The class is one state machine (start, type, settle a run, interrupt,
 * reset): its transitions share the run's fields, and split
 * across files they would have to pass them around. The dialects, the output
 * capture and the query answers are modules of their own.
 * @module
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:os';
import { basename } from 'node:path';
import type {
  SubprocessOutcome,
  SubprocessRuntime,
  SubprocessTerminalForeground,
  SubprocessTerminalHandle,
  SubprocessTerminalSpawnSpec,
} from '../seam/types.ts';
import type { AskingUsageMeter, LimitsRequest, SessionLimits, UsageMeter, UsageMetering } from '../seam/usage.ts';
import { ExecworldError, invalidArgument } from '../errors.ts';
import { bash } from './bash.ts';
import { RunCapture, type CaptureSnapshot } from './capture.ts';
import { QueryAnswerer } from './queries.ts';
import { promptMarkerSuffix, readyMarker, type ShellDialect } from './dialect.ts';
import type { RunOptions, RunReason, RunResult } from './types.ts';

export interface ShellOptions {
  /** @default bash */
  readonly dialect?: ShellDialect | undefined;
  /** The shell program, for a dialect whose default is not wanted (e.g. `/usr/local/bin/bash`). */
  readonly shellPath?: string | undefined;
  readonly cwd: string;
  /** Entries over the dialect's own (TERM=dumb, PAGER=cat…); null unsets one. */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** @default 40 */
  readonly rows?: number | undefined;
  /** @default 160 */
  readonly cols?: number | undefined;
  /** The terminal's grace between TERM and KILL when the shell is ended. @default 2000 */
  readonly graceMs?: number | undefined;
  /** Longest wait for a new shell to be ready. @default 20000 */
  readonly startTimeoutMs?: number | undefined;
  /** Longest wait for the shell's prompt after an interrupt, before the shell is started anew. @default 3000 */
  readonly interruptGraceMs?: number | undefined;
  /**
   * What the shell's terminal session may use: every command it runs shares
   * them (a runtime that takes `limits` on its terminals: both of execworld's).
   */
  readonly limits?: SessionLimits | undefined;
}

const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
const DEFAULT_ROWS = 40;
/** The first look for an input wait after the output went quiet; it doubles up to the last. */
const PROBE_FIRST_MS = 5;
const PROBE_MAX_MS = 250;
/** Longest wait before a line is typed for the shell to be back at its prompt (its marker). */
const PROMPT_WAIT_MS = 2000;

/** Why a shell cannot run the call: busy, closed, failed to start, or its start was aborted. An argument it refuses is the SDK's InvalidRequestError. */
export type ShellErrorCode = 'SHELL_BUSY' | 'CLOSED' | 'SHELL_START_FAILED' | 'ABORTED';

/** The error of a shell that cannot run the call: busy, closed, or failed to start. */
export class ShellError extends ExecworldError {
  declare readonly code: ShellErrorCode;
  constructor(code: ShellErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.name = 'ShellError';
  }
}

/** A call ended by its `detach` signal: the run goes on, unanswered, for a later `wait`. */
export class RunDetachedError extends Error {
  override name = 'RunDetachedError';
  constructor() {
    super('the call was detached from its run, which goes on');
  }
}

const newNonce = (): string => randomBytes(9).toString('base64url').replace(/[-_]/g, 'x');

function signalOfStatus(status: number | null): NodeJS.Signals | null {
  if (status === null || status <= 128 || status > 128 + 64) return null;
  const number = status - 128;
  for (const [name, value] of Object.entries(constants.signals)) if (value === number) return name as NodeJS.Signals;
  return null;
}

/** What a shell's session is in the middle of, for a daemon's takeover: see {@link PersistentShell.takeoverSnapshot}. */
export interface ShellSessionSnapshot {
  readonly nonce: string;
  readonly offset: number;
  readonly atPrompt: boolean;
  readonly answeredAtPrompt: boolean;
  readonly answered: boolean;
  readonly broken: boolean;
  /** The end of the output so far, for a prompt marker that goes on in the next chunk. */
  readonly tail: string;
}

/**
 * The engine's state, for a daemon's takeover: its shell's session (absent
 * when none runs: the next run starts one) and the run still open, with
 * everything its capture holds. The run's meter is not kept.
 */
export interface ShellEngineSnapshot {
  readonly session?: ShellSessionSnapshot | undefined;
  readonly run?: { readonly capture: CaptureSnapshot; readonly waitToken?: string | undefined; readonly answeredWait?: string | undefined } | undefined;
}

/** One started shell: its terminal, its output offset, and the run reading its output. */
class ShellSession {
  readonly terminal: SubprocessTerminalHandle;
  readonly nonce: string;
  /** Bytes of output so far. */
  offset = 0;
  /** Set once the output ended and the shell exited. */
  exit: SubprocessOutcome | undefined;
  readonly ended: Promise<SubprocessOutcome>;
  capture: RunCapture | undefined;
  /** Called with every chunk of output (after the capture took it), and once more at the exit. */
  onOutput: ((chunk?: Buffer) => void) | undefined;
  /** The shell's own hooks were lost (a shell that came back without its markers): start anew before the next run. */
  broken = false;
  /** The shell printed its prompt marker since the last line was typed: it is back at its prompt. */
  atPrompt = false;
  /** Since that prompt marker, a query of the shell was answered (for a shell that asks at each prompt). */
  answeredAtPrompt = false;
  /** A query of the shell was answered: its line editor is up. */
  answered = false;
  /** Called when `atPrompt` or `answeredAtPrompt` changed. */
  onPrompt: (() => void) | undefined;
  readonly #answerer: QueryAnswerer | undefined;
  readonly #promptSuffix: string;
  /** The end of the previous chunk, for a prompt marker split between chunks. */
  #tail = '';
  /** Writes in the order they were asked for. */
  #writes: Promise<void> = Promise.resolve();

  /**
   * @param answerQueries - the size of the terminal whose queries the session answers, if it does.
   * @param kept - the session a takeover handed over: `terminal`'s output goes on from its offset.
   */
  constructor(terminal: SubprocessTerminalHandle, answerQueries?: { rows: number; cols: number }, kept?: ShellSessionSnapshot) {
    this.terminal = terminal;
    this.nonce = kept?.nonce ?? newNonce();
    if (kept !== undefined) {
      this.offset = kept.offset;
      this.atPrompt = kept.atPrompt;
      this.answeredAtPrompt = kept.answeredAtPrompt;
      this.answered = kept.answered;
      this.broken = kept.broken;
      this.#tail = kept.tail;
    }
    this.#answerer =
      answerQueries === undefined
        ? undefined
        : new QueryAnswerer(answerQueries.rows, answerQueries.cols, (answer) => {
            void this.write(answer).catch(() => undefined);
            if (!this.answered) {
              this.answered = true;
              this.onPrompt?.();
            }
            if (this.atPrompt && !this.answeredAtPrompt) {
              this.answeredAtPrompt = true;
              this.onPrompt?.();
            }
          });
    this.#promptSuffix = promptMarkerSuffix(this.nonce);
    const output = terminal.output;
    const outputEnded = new Promise<void>((resolve) => {
      output.once('end', resolve);
      output.once('close', resolve);
      output.once('error', () => resolve());
    });
    output.on('data', (chunk: Buffer) => {
      const at = this.offset;
      this.offset += chunk.length;
      this.#answerer?.feed(chunk);
      this.#watch(chunk);
      this.capture?.push(chunk, at);
      this.onOutput?.(chunk);
    });
    this.ended = Promise.all([terminal.done, outputEnded]).then(([outcome]) => {
      this.exit = outcome;
      this.#answerer?.dispose();
      this.onOutput?.();
      this.onPrompt?.();
      return outcome;
    });
    this.ended.catch(() => undefined);
  }

  snapshot(): ShellSessionSnapshot {
    const { nonce, offset, atPrompt, answeredAtPrompt, answered, broken } = this;
    return { nonce, offset, atPrompt, answeredAtPrompt, answered, broken, tail: this.#tail };
  }

  /** Types `data`, after every earlier write. */
  write(data: string): Promise<void> {
    const next = this.#writes.then(() => this.terminal.write(data));
    this.#writes = next.catch(() => undefined);
    return next;
  }

  /** The line typed next is read by the shell at its prompt, not by what ran before. */
  typed(): void {
    this.atPrompt = false;
    this.answeredAtPrompt = false;
  }

  /** Notes the prompt marker. */
  #watch(chunk: Buffer): void {
    const text = this.#tail + chunk.toString('latin1');
    this.#tail = text.slice(-this.#promptSuffix.length);
    if (this.atPrompt || !text.includes(this.#promptSuffix)) return;
    this.atPrompt = true;
    this.answeredAtPrompt = false;
    this.onPrompt?.();
  }
}

/** What a terminal's foreground inspection tells beyond the seam's type, where its runtime knows it (local and remote do). */
type ForegroundFacts = SubprocessTerminalForeground & { inputWaitToken?: string; command?: string; readsLines?: boolean };

/** First and longest pause between looks at the terminal's foreground after an interrupt; the most signals it sends after the first. */
const FOLLOW_FIRST_MS = 2;
const FOLLOW_MAX_MS = 50;
const FOLLOW_MAX_SIGNALS = 4;

/**
 * A foreground an interrupt signalled: its group, and the program its
 * leader ran (undefined where the platform does not tell; null when it was
 * not seen).
 */
interface Signalled {
  group: number;
  command: string | undefined | null;
}

/** The foreground, or undefined when it cannot be looked at now (an exited terminal has none: its exit answers). */
async function lookAt(session: ShellSession): Promise<ForegroundFacts | undefined> {
  try {
    return await session.terminal.inspectForeground();
  } catch (_error) {
    return undefined;
  }
}

/**
 * The name of the program the group's leader runs, as a look tells it: a
 * look that proved an input wait names the waiting reader instead, which
 * says nothing of the leader (null: not known).
 */
const leaderOf = (facts: ForegroundFacts): string | undefined | null => (facts.inputWaiting ? null : facts.command);

/**
 * After an interrupt's SIGINT, until `done()` (the run's line ended, the
 * shell exited, or the grace passed): a program that takes the terminal
 * without having been signalled gets SIGINT too. A signal that lands on the
 * shell itself (its terminal's foreground between the commands of a line,
 * or forking the next one) never reaches a command it starts after; one
 * that lands on a child the shell forked, before it starts its program, is
 * taken by the shell's handler the child still has. In both cases a Ctrl-C
 * typed then would be lost as well; the interrupt's purpose is the run's
 * end, so it follows: a new group is signalled, and so is a group signalled
 * while its leader was still the shell (a forked child), or before it was
 * seen, once it runs another program. A group signalled as the program it runs is never
 * signalled again (a second SIGINT is a forced stop to many programs), nor
 * is the shell's own group: it is on its way back to its prompt.
 */
async function followInterrupt(session: ShellSession, shellName: string, signalled: Signalled[], done: () => boolean): Promise<void> {
  const shellGroup = session.terminal.pid;
  let pause = FOLLOW_FIRST_MS;
  while (!done() && signalled.length <= FOLLOW_MAX_SIGNALS) {
    await new Promise((resolve) => setTimeout(resolve, pause));
    pause = Math.min(pause * 2, FOLLOW_MAX_MS);
    const facts = await lookAt(session);
    if (facts === undefined || done()) continue;
    const group = facts.processGroupId;
    const leader = leaderOf(facts);
    if (group === shellGroup) continue;
    const seen = signalled.find((entry) => entry.group === group);
    if (seen !== undefined) {
      // Known leaders only. A group signalled unseen took the terminal just then: it counts as the shell's child,
      // which the signal may have reached before it started its program (over a remote runtime the look before
      // the signal is a round trip earlier).
      const was = seen.command === null ? shellName : seen.command;
      if (typeof leader !== 'string' || was === undefined || leader === was || was !== shellName) continue;
      seen.command = leader;
    } else signalled.push({ group, command: leader });
    try {
      await session.terminal.signalForeground('SIGINT');
    } catch (_error) {
      // A foreground that went away meanwhile: the next look, or the run's end, tells.
    }
  }
}

/** The keys a terminal's driver may take for itself in raw mode too: ^C ^\\ ^Z (signals), ^S ^Q (flow control). */
const DRIVER_KEYS: ReadonlySet<string> = new Set(['\x03', '\x1c', '\x1a', '\x13', '\x11']);

/**
 * Whether `input` wakes the reader of the terminal: input with a character
 * the terminal's driver hands on (not only the keys it may take for itself:
 * ^C ^\\ ^Z as signals, ^S ^Q as flow control) where the terminal is known
 * to read raw (`readsLines` false), else input that holds a line's end
 * (Enter types \r) or Ctrl-D, which wakes it in either mode.
 */
const wakesAReader = (input: string, readsLines: boolean | undefined): boolean =>
  (readsLines === false && [...input].some((character) => !DRIVER_KEYS.has(character))) ||
  input.includes('\r') ||
  input.includes('\n') ||
  input.includes('\u0004');

/** The state of the run in progress, across the calls that answer it. */
interface Run {
  readonly capture: RunCapture;
  readonly session: ShellSession;
  /** Measures the run, where its terminal can: a local runtime's in a cgroup reads it, a remote one's asks the daemon. */
  readonly meter: UsageMeter | AskingUsageMeter | undefined;
  /** The token of the input wait the last answer proved, where the terminal names one. */
  waitToken?: string | undefined;
  /**
   * The wait a send of a line answered: input written to it may not have reached the program yet (the kernel hands
   * a pty's input to its reader from a work queue), so until the program has run, the same wait, by its token, is
   * still there. It is no answer to the send; a new wait (a new token) or the run's end is. Only for input that wakes
   * the reader: a line (or an end of file) in either terminal mode, or any byte where the terminal reads raw (a pager,
   * an editor); part of a line leaves a reader in canonical mode asleep in the same wait, which then is the answer.
   */
  answeredWait?: string | undefined;
  /** Whether the terminal read its input by lines when the wait was proven, where the runtime tells it. */
  readsLines?: boolean | undefined;
}

export class PersistentShell {
  readonly #runtime: SubprocessRuntime;
  readonly #options: ShellOptions;
  readonly #dialect: ShellDialect;
  #session: Promise<ShellSession> | undefined;
  /** The session `#session` resolved with, while it is the engine's. */
  #ready: ShellSession | undefined;
  #run: Run | undefined;
  /** The call that waits for the run's answer now: another caller's `interrupt()` interrupts the run through it. */
  #holder: { interrupt(): void; readonly answer: Promise<RunResult> } | undefined;
  #busy = false;
  #closed = false;

  private constructor(runtime: SubprocessRuntime, options: ShellOptions) {
    this.#runtime = runtime;
    this.#options = options;
    this.#dialect = options.dialect ?? bash;
  }

  /** Starts a shell on `runtime` and waits until it is ready. */
  static async start(runtime: SubprocessRuntime, options: ShellOptions): Promise<PersistentShell> {
    const shell = new PersistentShell(runtime, options);
    await shell.#ensureSession();
    return shell;
  }

  /**
   * For a daemon's takeover (the engine goes on in the daemon's next image):
   * its state, or why it cannot be handed over now. A call in progress is
   * not part of it: its caller goes with the old image, and the run it
   * waited for stays open, for `wait` to answer.
   */
  takeoverSnapshot(): ShellEngineSnapshot | string {
    if (this.#closed) return 'it is being closed';
    if (this.#session !== undefined && this.#ready === undefined) return 'its shell is starting';
    const run = this.#run;
    const session = this.#ready;
    if (run !== undefined && run.session !== session) return 'its open run is on a shell that is being replaced';
    if (session === undefined || session.exit !== undefined) {
      // A shell that exited between runs is replaced by the next run; one that exited under an open run is answered first.
      return run === undefined ? {} : 'its shell exited under the open run, which is being answered';
    }
    return {
      session: session.snapshot(),
      ...(run === undefined ? {} : { run: { capture: run.capture.snapshot(), waitToken: run.waitToken, answeredWait: run.answeredWait } }),
    };
  }

  /**
   * The engine a {@link takeoverSnapshot} was taken of, in the daemon's next
   * image: on `terminal`, the same terminal, whose output goes on from the
   * session's offset; a run that was open is open again.
   */
  static resume(
    runtime: SubprocessRuntime,
    options: ShellOptions,
    snapshot: ShellEngineSnapshot,
    terminal: SubprocessTerminalHandle | undefined,
  ): PersistentShell {
    const shell = new PersistentShell(runtime, options);
    if (snapshot.session === undefined || terminal === undefined) return shell;
    const answers = shell.#dialect.queriesCursorAtPrompt;
    const size = { rows: options.rows ?? DEFAULT_ROWS, cols: options.cols ?? 160 };
    const session = new ShellSession(terminal, answers ? size : undefined, snapshot.session);
    shell.#ready = session;
    shell.#session = Promise.resolve(session);
    if (snapshot.run !== undefined) {
      const capture = RunCapture.restore(snapshot.run.capture);
      session.capture = capture;
      shell.#run = { capture, session, meter: undefined, waitToken: snapshot.run.waitToken, answeredWait: snapshot.run.answeredWait };
    }
    return shell;
  }

  /** The terminal the shell runs on now (a new one after a reset). */
  get terminal(): Promise<SubprocessTerminalHandle> {
    return this.#ensureSession().then((session) => session.terminal);
  }

  /** Whether a run waits to be answered (after `waiting_for_input`, `idle_timeout` or `wait_limit`). */
  get pending(): boolean {
    return this.#run !== undefined;
  }

  /**
   * Runs `command` in the shell. Refused with SHELL_BUSY while an earlier run
   * is open (a program of it waits for input): its input is never typed into.
   */
  async run(command: string, options: RunOptions = {}): Promise<RunResult> {
    if (typeof command !== 'string') throw invalidArgument('command must be a string');
    return this.#holding(async (interrupted) => {
      if (this.#run !== undefined) {
        throw new ShellError('SHELL_BUSY', 'the previous command still runs (it waits for input or was left idle): send() to it, wait(), or interrupt() it');
      }
      const startedAt = performance.now();
      const session = await this.#readySession(options.signal);
      // Interrupted while its shell was made ready: the line is never typed.
      if (interrupted.aborted) {
        const at = session.offset;
        return {
          output: '',
          exitCode: null,
          signal: null,
          reason: 'canceled',
          durationMs: performance.now() - startedAt,
          truncated: false,
          outputStart: at,
          outputEnd: at,
        };
      }
      // From before its line is typed: cpu and the limits hit are the difference over the run, across its answers.
      // (A remote terminal's meter asks the daemon for the start, ahead of the line on the same connection.)
      const meter = (session.terminal as Partial<UsageMetering>).usageMeter?.();
      const runNonce = newNonce();
      const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
      const capture = new RunCapture(runNonce, session.nonce, session.offset, maxOutputBytes, this.#options.rows ?? DEFAULT_ROWS);
      session.capture = capture;
      this.#run = { capture, session, meter };
      session.typed();
      try {
        await session.write(`${this.#dialect.wrap(command, runNonce, session.nonce)}\r`);
      } catch (error) {
        // The line never reached the shell (its terminal ended meanwhile): no run is open, and the next starts afresh.
        meter?.close();
        this.#run = undefined;
        session.capture = undefined;
        this.#reset(session);
        throw error;
      }
      return this.#answer(startedAt, options, interrupted);
    });
  }

  /** Writes `input` to the open run's program (a reply to its prompt) and waits for the run as `run` does. */
  async send(input: string, options: RunOptions = {}): Promise<RunResult> {
    return this.#holding(async (interrupted) => {
      const run = this.#openRun('send');
      const startedAt = performance.now();
      // Interrupted first: the input is not typed, and the run is interrupted.
      if (!interrupted.aborted) {
        run.answeredWait = wakesAReader(input, run.readsLines) ? run.waitToken : undefined;
        await run.session.write(input);
      }
      return this.#answer(startedAt, options, interrupted);
    });
  }

  /** Waits on for the open run. */
  async wait(options: RunOptions = {}): Promise<RunResult> {
    return this.#holding(async (interrupted) => {
      this.#openRun('wait');
      return this.#answer(performance.now(), options, interrupted);
    });
  }

  /**
   * Interrupts the open run's program (SIGINT, or the dialect's key to the
   * shell itself) and answers how it ended. While another call (a run, send,
   * wait or interrupt) waits for the run, that call is answered `canceled`,
   * and this one with the same answer.
   */
  async interrupt(): Promise<RunResult> {
    const holder = this.#holder;
    if (holder !== undefined && !this.#closed) {
      holder.interrupt();
      const answer = await holder.answer;
      // Come after the holder had its answer, which left the run open: the open run is interrupted now, once the
      // holder's call let go of the shell (its last steps run as microtasks before the next turn).
      const open = answer.reason === 'waiting_for_input' || answer.reason === 'idle_timeout' || answer.reason === 'wait_limit';
      if (!open) return answer;
      await new Promise((resolve) => setImmediate(resolve));
      return this.#run === undefined ? answer : this.interrupt();
    }
    // Itself the holder: an interrupt while this one waits for the run is answered with it.
    return this.#holding(async () => {
      const run = this.#openRun('interrupt');
      return this.#interrupt(run, performance.now(), 'canceled');
    });
  }

  /**
   * Ends the shell and everything it runs. Later calls fail with CLOSED; a
   * close whose cleanup failed may be called again to retry it.
   */
  async close(): Promise<void> {
    this.#closed = true;
    this.#run?.meter?.close();
    this.#run = undefined;
    const started = await this.#session?.catch(() => undefined);
    await started?.terminal.terminate();
    this.#session = undefined;
    this.#ready = undefined;
  }

  #openRun(call: string): Run {
    const run = this.#run;
    if (run === undefined) throw invalidArgument(`${call}: no command is running`);
    return run;
  }

  /**
   * An exclusive call that waits for the run's answer. Until it is answered
   * it is the run's holder: `interrupted` aborts when another caller
   * interrupts the run, and that caller gets the same answer.
   */
  async #holding(body: (interrupted: AbortSignal) => Promise<RunResult>): Promise<RunResult> {
    return this.#exclusive(async () => {
      const interrupting = new AbortController();
      const answer = body(interrupting.signal);
      const holder = { interrupt: () => interrupting.abort(), answer };
      this.#holder = holder;
      try {
        return await answer;
      } finally {
        if (this.#holder === holder) this.#holder = undefined;
      }
    });
  }

  /** One call at a time: a second call while one waits is refused, never queued behind a wait. */
  async #exclusive<T>(body: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new ShellError('CLOSED', 'the shell is closed');
    if (this.#busy) throw new ShellError('SHELL_BUSY', 'another call on this shell is in progress');
    this.#busy = true;
    try {
      return await body();
    } finally {
      this.#busy = false;
    }
  }

  /**
   * The session a line can be typed into now: a live one (a shell that ended
   * between runs is replaced), back at its prompt, or after PROMPT_WAIT_MS
   * anyway (a shell whose prompt hook was removed).
   */
  async #readySession(signal?: AbortSignal): Promise<ShellSession> {
    let session = await this.#ensureSession(signal);
    if (session.exit !== undefined) {
      this.#reset(session);
      this.#session = undefined;
      session = await this.#ensureSession(signal);
    }
    const ready = (): boolean => session.exit !== undefined || (session.atPrompt && (!this.#dialect.queriesCursorAtPrompt || session.answeredAtPrompt));
    if (ready()) return session;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, PROMPT_WAIT_MS);
      function done(): void {
        clearTimeout(timer);
        session.onPrompt = undefined;
        resolve();
      }
      session.onPrompt = () => {
        if (ready()) done();
      };
    });
    return session;
  }

  #ensureSession(signal?: AbortSignal): Promise<ShellSession> {
    this.#session ??= this.#startSession(signal);
    const session = this.#session;
    // A failed start is not kept: the next call tries again.
    session.catch(() => {
      if (this.#session === session) this.#session = undefined;
    });
    return session;
  }

  async #startSession(signal?: AbortSignal): Promise<ShellSession> {
    const dialect = this.#dialect;
    const env = { ...dialect.environment(), ...this.#options.env };
    const size = { rows: this.#options.rows ?? DEFAULT_ROWS, cols: this.#options.cols ?? 160 };
    const answers = dialect.queriesCursorAtPrompt;
    // The session answers the shell's queries: a runtime that would too (a daemon, through RemoteRuntime's
    // terminal options) is asked not to. A runtime without such options ignores the argument.
    type WithOptions = (spec: SubprocessTerminalSpawnSpec & LimitsRequest, options?: { answerQueries?: boolean }) => Promise<SubprocessTerminalHandle>;
    const spawnTerminal: WithOptions = this.#runtime.spawnTerminal.bind(this.#runtime);
    const terminal = await spawnTerminal(
      {
        argv: dialect.argv(this.#options.shellPath),
        cwd: this.#options.cwd,
        env,
        ...size,
        graceMs: this.#options.graceMs ?? 2000,
        signal,
        ...(this.#options.limits === undefined ? {} : { limits: this.#options.limits }),
      },
      answers ? { answerQueries: false } : undefined,
    );
    const session = new ShellSession(terminal, answers ? size : undefined);
    const ready = Buffer.from(readyMarker(session.nonce), 'latin1');
    let seen = Buffer.alloc(0);
    const timeoutMs = this.#options.startTimeoutMs ?? 20_000;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => finish(new ShellError('SHELL_START_FAILED', `the shell was not ready within ${timeoutMs} ms`)), timeoutMs);
        const onAbort = (): void => finish(new ShellError('ABORTED', 'aborted while the shell started'));
        signal?.addEventListener('abort', onAbort, { once: true });
        const finish = (error?: Error): void => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          session.onOutput = undefined;
          if (error === undefined) resolve();
          else reject(error);
        };
        session.onOutput = (chunk) => {
          if (chunk !== undefined) {
            // Only the tail can hold a marker that is not yet complete.
            seen = Buffer.concat([seen.subarray(Math.max(0, seen.length - ready.length)), chunk]);
            if (seen.includes(ready)) finish();
          } else if (session.exit !== undefined) {
            finish(new ShellError('SHELL_START_FAILED', `the shell exited while starting (${JSON.stringify(session.exit)})`));
          }
        };
        const typeSetup = (): void => void session.write(`${dialect.setup(session.nonce)}\r`).catch((error: unknown) => finish(error as Error));
        // A shell that asks at its prompt reads its first line once its line editor is up (its first query answered).
        if (!dialect.queriesCursorAtPrompt || session.answered) typeSetup();
        else
          session.onPrompt = () => {
            if (!session.answered) return;
            session.onPrompt = undefined;
            typeSetup();
          };
      });
    } catch (error) {
      await terminal.terminate().catch(() => undefined);
      throw error;
    }
    this.#ready = session;
    return session;
  }

  /**
   * Waits for the open run's next answer: its line ended, its program waits
   * for input, the shell exited, silence, the deadline, or the caller's abort.
   */
  async #answer(startedAt: number, options: RunOptions, interrupted: AbortSignal): Promise<RunResult> {
    const run = this.#run!;
    const { session, capture } = run;
    const outcome = await new Promise<{ reason: RunReason | 'detached'; waitingFor?: RunResult['waitingFor'] }>((resolve) => {
      let settled = false;
      let probeDelay = PROBE_FIRST_MS;
      let probeTimer: ReturnType<typeof setTimeout> | undefined;
      let probing = false;
      let idleTimer: ReturnType<typeof setTimeout> | undefined;
      const finish = (reason: RunReason | 'detached', waitingFor?: RunResult['waitingFor']): void => {
        if (settled) return;
        settled = true;
        clearTimeout(probeTimer);
        clearTimeout(idleTimer);
        clearTimeout(deadline);
        clearTimeout(waitLimit);
        options.signal?.removeEventListener('abort', onAbort);
        interrupted.removeEventListener('abort', onAbort);
        options.detach?.removeEventListener('abort', onDetach);
        session.onOutput = undefined;
        resolve({ reason, ...(waitingFor === undefined ? {} : { waitingFor }) });
      };
      const check = (): boolean => {
        if (capture.lineEnd !== undefined) finish('completed');
        else if (session.exit !== undefined) finish('shell_exited');
        return settled;
      };
      const probe = async (): Promise<void> => {
        probeTimer = undefined;
        if (settled || probing) return;
        probing = true;
        try {
          const facts = await lookAt(session);
          if (settled || check()) return;
          // The shell's own group counts once it took the run's line: a builtin such as `read` waits there.
          const waiting = facts?.inputWaiting === true && (facts.processGroupId !== session.terminal.pid || capture.started);
          // The wait the input was sent to, not yet woken by it, is not a wait again.
          if (waiting && (facts.inputWaitToken === undefined || facts.inputWaitToken !== run.answeredWait)) {
            run.waitToken = facts.inputWaitToken;
            run.readsLines = facts.readsLines;
            run.answeredWait = undefined;
            finish('waiting_for_input', { processGroupId: facts.processGroupId, command: facts.command });
            return;
          }
        } finally {
          probing = false;
        }
        if (!settled) schedule();
      };
      const schedule = (): void => {
        clearTimeout(probeTimer);
        probeTimer = setTimeout(() => void probe(), probeDelay);
        probeDelay = Math.min(probeDelay * 2, PROBE_MAX_MS);
      };
      const armIdle = (): void => {
        if (options.idleTimeoutMs === undefined) return;
        clearTimeout(idleTimer);
        idleTimer = setTimeout(() => finish('idle_timeout'), options.idleTimeoutMs);
      };
      const onAbort = (): void => finish('canceled');
      const onDetach = (): void => finish('detached');
      const deadline = options.timeoutMs === undefined ? undefined : setTimeout(() => finish('timeout'), options.timeoutMs);
      const waitLimit = options.waitMs === undefined ? undefined : setTimeout(() => finish('wait_limit'), options.waitMs);
      if (options.signal?.aborted === true || interrupted.aborted) {
        finish('canceled');
        return;
      }
      if (options.detach?.aborted === true) {
        finish('detached');
        return;
      }
      options.signal?.addEventListener('abort', onAbort, { once: true });
      interrupted.addEventListener('abort', onAbort, { once: true });
      options.detach?.addEventListener('abort', onDetach, { once: true });
      session.onOutput = () => {
        if (check()) return;
        armIdle();
        // Output flows: look for a wait again soon after it stops.
        probeDelay = PROBE_FIRST_MS;
        schedule();
      };
      if (check()) return;
      armIdle();
      schedule();
    });
    // Nothing is taken from the capture: the run's next answer has all of it.
    if (outcome.reason === 'detached') throw new RunDetachedError();
    if (outcome.reason === 'timeout' || outcome.reason === 'canceled') return this.#interrupt(run, startedAt, outcome.reason);
    return this.#result(run, startedAt, outcome.reason, outcome.waitingFor);
  }

  /** SIGINT to the foreground; the answer once the shell is back, or after a reset when it does not come back. */
  async #interrupt(run: Run, startedAt: number, reason: 'timeout' | 'canceled'): Promise<RunResult> {
    const { session, capture } = run;
    const over = (): boolean => capture.lineEnd !== undefined || session.exit !== undefined;
    if (!over()) {
      const deadline = performance.now() + (this.#options.interruptGraceMs ?? 3000);
      const input = this.#dialect.interruptInput;
      const shellGroup = session.terminal.pid;
      let facts = await lookAt(session);
      // The shell still reading the run's line: a SIGINT now would discard what it read, and it would run the rest
      // of the line as a command. The signal waits until the line was taken (its start marker) or a program took
      // the terminal.
      for (let pause = FOLLOW_FIRST_MS; input === undefined && !capture.started && !over() && facts?.processGroupId === shellGroup;) {
        if (performance.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, pause));
        pause = Math.min(pause * 2, FOLLOW_MAX_MS);
        facts = await lookAt(session);
      }
      let signalled: Signalled[] | undefined;
      if (!over()) {
        try {
          // The shell itself in the foreground, reading its terminal (pwsh's Read-Host): the key interrupts it, a signal would not.
          if (input !== undefined && facts?.processGroupId === shellGroup) await session.write(input);
          else {
            const group = await session.terminal.signalForeground('SIGINT');
            // The program its leader ran as the signal went, when the look before it saw the same group: else not known (null).
            if (input === undefined) signalled = [{ group, command: facts?.processGroupId === group ? leaderOf(facts) : null }];
          }
        } catch (_error) {
          // Gone meanwhile: the exit or the markers tell.
        }
      }
      let settled = false;
      const back = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => done(false), Math.max(0, deadline - performance.now()));
        const done = (value: boolean): void => {
          settled = true;
          clearTimeout(timer);
          session.onOutput = undefined;
          resolve(value);
        };
        session.onOutput = () => {
          if (over()) done(true);
        };
        session.onOutput();
        // The shell's name as the kernel tells it: its program's file name, at most 15 bytes.
        const shellName = basename(this.#dialect.argv(this.#options.shellPath)[0] ?? '').slice(0, 15);
        if (signalled !== undefined && !settled) void followInterrupt(session, shellName, signalled, () => settled);
      });
      if (!back) session.broken = true;
    }
    return this.#result(run, startedAt, reason);
  }

  async #result(run: Run, startedAt: number, reason: RunReason, waitingFor?: RunResult['waitingFor']): Promise<RunResult> {
    const { session, capture } = run;
    const open = reason === 'waiting_for_input' || reason === 'idle_timeout' || reason === 'wait_limit';
    const exited = capture.lineEnd === undefined && session.exit !== undefined;
    const taken = capture.take(open || exited || session.broken);
    let exitCode: number | null = null;
    let signal: NodeJS.Signals | null = null;
    if (capture.lineEnd !== undefined) {
      exitCode = capture.lineEnd.status;
      signal = signalOfStatus(exitCode);
    } else if (exited) {
      exitCode = session.exit!.exitCode;
      signal = session.exit!.signal;
    }
    const finalReason: RunReason = reason === 'completed' && exited ? 'shell_exited' : reason;
    // After the run's answer is taken: a remote meter's end is the daemon's answer, asked now.
    const usage = await run.meter?.usage();
    if (!open) {
      // The run is over: its meter keeps its last figures and holds nothing open.
      run.meter?.close();
      this.#run = undefined;
      session.capture = undefined;
      if (session.exit !== undefined || session.broken) this.#reset(session);
    }
    return {
      output: taken.output,
      exitCode,
      signal,
      reason: finalReason,
      durationMs: performance.now() - startedAt,
      truncated: taken.truncated,
      ...(waitingFor === undefined ? {} : { waitingFor }),
      outputStart: taken.outputStart,
      outputEnd: taken.outputEnd,
      ...(usage === undefined ? {} : { usage }),
    };
  }

  /** Drops a shell that exited or lost its hooks; the next run starts a fresh one. */
  #reset(session: ShellSession): void {
    if (this.#ready === session) this.#ready = undefined;
    void this.#session?.then((current) => {
      if (current === session) this.#session = undefined;
    });
    if (session.exit === undefined) void session.terminal.terminate().catch(() => undefined);
  }
}
