/**
 * What a persistent shell's caller sees: the options of a run and its result.
 * @module
 */
import type { RunUsage } from '../seam/usage.ts';

/**
 * Why a run answered:
 * - `completed`: the command finished and the shell is back at its prompt;
 * - `waiting_for_input`: a program of the command is proven to be reading the
 *   terminal (a prompt, a pager, an editor); the run stays open: answer with
 *   `send()`, stop it with `interrupt()`, or `wait()` on;
 * - `idle_timeout`: no output for `idleTimeoutMs`; the run stays open, as above;
 * - `wait_limit`: the call waited `waitMs` and the command still runs; the run
 *   stays open, as above (a caller's own bound on one answer, whatever the output);
 * - `timeout`: `timeoutMs` passed; the command was interrupted (SIGINT), and the
 *   shell was started anew if it did not come back;
 * - `canceled`: the caller's signal aborted; interrupted like a timeout;
 * - `shell_exited`: the shell itself ended (`exit 3`, `exec`, `set -e`); the
 *   next run starts a fresh shell.
 */
export type RunReason = 'completed' | 'waiting_for_input' | 'idle_timeout' | 'wait_limit' | 'timeout' | 'canceled' | 'shell_exited';

export interface RunOptions {
  /** Longest the command may run from this call on; then it is interrupted. @default no limit */
  readonly timeoutMs?: number | undefined;
  /** Longest silence (no output) before the call answers `idle_timeout`, leaving the command running. @default no limit */
  readonly idleTimeoutMs?: number | undefined;
  /** Longest this call waits before it answers `wait_limit`, leaving the command running. @default no limit */
  readonly waitMs?: number | undefined;
  /** Aborting it interrupts the command and answers `canceled`. */
  readonly signal?: AbortSignal | undefined;
  /**
   * Aborting it ends the call and leaves the command running, its output
   * kept for the run's next answer: the call rejects with {@link RunDetachedError},
   * and `wait` answers the run later (a caller that lost its connection and asks again).
   */
  readonly detach?: AbortSignal | undefined;
  /**
   * Output bytes one answer holds at most: beyond it the head and the tail are
   * kept (half each) and a line in between says how many bytes were cut.
   * Set by `run`; `send` and `wait` answer within the run's.
   * @default 1 MiB
   */
  readonly maxOutputBytes?: number | undefined;
}

export interface RunResult {
  /**
   * What the command printed since the previous answer of the same run (the
   * first answer: since it started), as text: escape sequences removed, line
   * ends as `\n`, invalid UTF-8 as U+FFFD.
   */
  readonly output: string;
  /** The command's exit status; for `shell_exited` the shell's own. Null when none is known. */
  readonly exitCode: number | null;
  /**
   * The signal that ended the command, by the 128+n convention of an exit
   * status above 128 (a shell's status cannot tell `kill -9` from `exit 137`),
   * or the signal that ended the shell.
   */
  readonly signal: NodeJS.Signals | null;
  readonly reason: RunReason;
  /** Milliseconds from the call to its answer. */
  readonly durationMs: number;
  /** Output was cut to `maxOutputBytes`. */
  readonly truncated: boolean;
  /** With `waiting_for_input`: who waits. */
  readonly waitingFor?: { readonly processGroupId: number; readonly command?: string | undefined } | undefined;
  /** Offsets of `output` in the terminal's output stream: the raw bytes stay readable there while retained. */
  readonly outputStart: number;
  readonly outputEnd: number;
  /**
   * What the run used so far, where the shell's terminal measures runs (a
   * local runtime's, in a cgroup): cpu and the limits hit over the run, the
   * peak the run's or, where the kernel cannot reset it, the shell's (`peakScope`).
   */
  readonly usage?: RunUsage | undefined;
}
