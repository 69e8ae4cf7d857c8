/**
 * A terminal on the daemon, behind the seam's terminal handle.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { SubprocessOutcome, SubprocessTerminalForeground, SubprocessTerminalHandle, SubprocessTerminalSignal } from '../seam/types.ts';
import type { OperationResult } from '../protocol/operations.ts';
import { ConnectionError, invalidArgument, remoteError, type ExecworldError } from '../errors.ts';
import { retryableOnce } from '../seam/teardown.ts';
import type { Connection } from './connection.ts';
import { toOutcome } from './process.ts';
import { SubscribedReadable } from './streams.ts';
import { usageSince, type AskingUsageMeter, type RunUsage, type SessionUsage, type UsageMetering, type UsageReporting } from '../seam/usage.ts';

type TerminalInfo = OperationResult<'terminal.get'>;
/** A terminal's screen at an exact output offset (`terminal.screen`). */
export type TerminalScreen = OperationResult<'terminal.screen'>;

/** Foreground facts, with the identity of the input wait when there is one. */
export interface RemoteTerminalForeground extends SubprocessTerminalForeground {
  inputWaitToken?: string | undefined;
  /** The command name, where the daemon's platform tells it: of the program proven to wait for input, else of the group's leader. */
  command?: string | undefined;
  /** While inputWaiting, where the daemon's platform tells it: whether the terminal reads input by lines (canonical mode). */
  readsLines?: boolean | undefined;
}

export class RemoteTerminal implements SubprocessTerminalHandle, UsageReporting, UsageMetering {
  /** The daemon's id of this terminal, for attaching to it again. */
  readonly id: string;
  readonly pid: number;
  readonly output: Readable;
  readonly #output: SubscribedReadable;
  readonly done: Promise<SubprocessOutcome>;
  readonly #connection: Connection;
  readonly #inFlight = new Set<Promise<unknown>>();
  /**
   * Names this handle's writes: the daemon counts sequence numbers per writer,
   * so another handle on the same terminal never makes a write look like a retry.
   */
  readonly #writer = randomUUID();
  #seq = 0;
  #exited = false;
  #usage: SessionUsage | undefined;
  readonly #terminate = retryableOnce(() => this.#terminateOnce());

  /** @internal Made by RemoteRuntime. */
  constructor(connection: Connection, info: TerminalInfo, from = 0) {
    this.#connection = connection;
    this.id = info.id;
    this.pid = info.pid;
    let outputEnded!: () => void;
    let outputFailed!: (error: ExecworldError) => void;
    const ended = new Promise<void>((resolve, reject) => {
      outputEnded = resolve;
      outputFailed = reject;
    });
    this.output = this.#output = new SubscribedReadable(connection, { kind: 'terminal', id: info.id, stream: 'output' }, from, {
      onEnd: () => outputEnded(),
      onError: (error) => outputFailed(error),
    });
    const exit = connection.call('terminal.done', { id: this.id }).then((result) => {
      // The program is gone: what is left of its output is finite, so a paused reader no longer holds up done.
      this.#output.release();
      this.#usage = result.usage;
      return result;
    });
    // The outcome comes after the last output byte, as the seam promises; a lost connection rejects it.
    this.done = Promise.all([exit, ended]).then(([result]) => {
      this.#exited = true;
      return toOutcome(result.exit);
    });
    this.done.catch(() => undefined);
    ended.catch(() => undefined);
  }

  /**
   * What the terminal's session used, as the daemon's done answer said:
   * undefined until `done` settled, and where the daemon's cell keeps no
   * counters. {@link info} reads it while the terminal runs.
   */
  usage(): SessionUsage | undefined {
    return this.#usage;
  }

  /**
   * Starts measuring one run in the terminal (a persistent shell's command):
   * the daemon's answer of the session's usage so far now, and again at each
   * `usage()`, the run's usage being the difference ({@link usageSince}: cpu
   * and the limits hit over the run, the peak the session's). Undefined where
   * the daemon's answer carries no usage (no cgroup counts the terminal) or
   * it could not be asked: the run then reports none, as a local terminal
   * without a cell does.
   */
  usageMeter(): AskingUsageMeter {
    const usageNow = async (): Promise<SessionUsage | undefined> => {
      try {
        return (await this.#track(this.info())).usage;
      } catch (_error) {
        // Gone, or the connection lost: once it ended, the done answer's figures.
        return this.#usage;
      }
    };
    // Asked now, not awaited: the daemon answers one connection's calls in the order they came, so this reading
    // is taken before the run's line, typed next, reaches the terminal; the run waits for no round trip of its own.
    const start = usageNow();
    let last: RunUsage | undefined;
    let closed = false;
    return {
      usage: async () => {
        if (closed) return last;
        const [begin, end] = await Promise.all([start, usageNow()]);
        // No counters where the session has no cell (no cgroup): no usage, as a local terminal without one.
        if (begin !== undefined && end !== undefined) last = usageSince(begin, end);
        return last;
      },
      close: () => {
        closed = true;
      },
    };
  }

  /** Tracks a call, so terminate can join it. */
  #track<T>(promise: Promise<T>): Promise<T> {
    this.#inFlight.add(promise);
    const forget = (): void => {
      this.#inFlight.delete(promise);
    };
    promise.then(forget, forget);
    return promise;
  }

  write(data: string): Promise<void> {
    if (typeof data !== 'string') return Promise.reject(invalidArgument('terminal input must be a string'));
    // The daemon's own answer, without asking it: the same class as when it answers.
    if (this.#exited) return Promise.reject(remoteError({ code: 'TERMINAL_EXITED', message: 'the terminal has exited' }));
    // The sequence number makes the write safe to send again after a reconnect.
    this.#seq += 1;
    // applied: false can only answer a retry of this very write that succeeded: the daemon fails a retry of a failed one.
    return this.#track(this.#connection.call('terminal.input', { id: this.id, data, writer: this.#writer, seq: this.#seq }).then(() => undefined));
  }

  /**
   * The daemon's foreground facts. A proven input wait is reported only once
   * this handle's `output` has emitted every byte the terminal produced before
   * the proof (up to the daemon's `outputEnd`), as the local provider does: a
   * caller that sees the wait has already seen what the program printed. While
   * the reader holds output back, the answer is "not waiting yet".
   */
  async inspectForeground(): Promise<RemoteTerminalForeground | undefined> {
    const result = await this.#track(this.#connection.call('terminal.foreground', { id: this.id }));
    const facts = result.foreground ?? undefined;
    if (facts?.inputWaiting !== true) return facts;
    const delivered = await this.#output.whenEmitted(result.outputEnd, this.#connection.options.requestTimeoutMs);
    return delivered ? facts : { processGroupId: facts.processGroupId, inputWaiting: false };
  }

  async signalForeground(signal: SubprocessTerminalSignal): Promise<number> {
    // Not repeated after a reconnect (the table marks terminal.signal not idempotent): a second SIGINT is not the same as one.
    const result = await this.#track(this.#connection.call('terminal.signal', { id: this.id, signal }));
    return result.processGroupId;
  }

  /** Changes the terminal's size; its foreground program gets SIGWINCH. */
  async resize(cols: number, rows: number): Promise<void> {
    await this.#track(this.#connection.call('terminal.resize', { id: this.id, rows, cols }));
  }

  /**
   * The terminal's screen as the daemon's emulator draws it: text rows,
   * cursor, alternate screen and title, at `offset`, an exact output offset.
   * Reading the output from `offset` on (`RemoteRuntime.attachTerminal(id, { from })`)
   * continues it with nothing lost or repeated.
   */
  async screen(): Promise<TerminalScreen> {
    return await this.#connection.call('terminal.screen', { id: this.id });
  }

  /** The daemon's facts of this terminal. */
  async info(): Promise<TerminalInfo> {
    return await this.#connection.call('terminal.get', { id: this.id });
  }

  terminate(): Promise<void> {
    return this.#terminate();
  }

  async #terminateOnce(): Promise<void> {
    await this.#connection.call('terminal.terminate', { id: this.id });
    // After this settles no call of the handle is still in flight.
    await Promise.allSettled([...this.#inFlight]);
    await this.done.catch((error: unknown) => {
      if (!(error instanceof ConnectionError)) throw error;
    });
  }
}
