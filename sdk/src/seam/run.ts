/**
 * One call that runs a command to completion: `runtime.run(argv | command,
 * options?)`. It is built on the seam's `spawn` (the SDK's runtimes) or on a
 * process session (the daemon's `POST /v1/run`), never on a second way of
 * starting programs: {@link finishRun} takes whatever started the process, and
 * both sides share it, its bounds and its result.
 *
 * Output is bounded per stream by `maxOutputBytes` (default 1 MiB): the first
 * half and the last half are kept, and the bytes cut from the middle are
 * counted in `truncated`. Streaming callbacks see every byte.
 * @module
 */
import { ByteTail, concat } from './byte-tail.ts';
import type { SpawnRequest } from './defaults.ts';
import { DEFAULT_GRACE_MS, DEFAULT_RUN_OUTPUT_BYTES, MAX_RUN_OUTPUT_BYTES, MAX_TIMER_DELAY_MS } from './limits.ts';
import type { SubprocessHandle, SubprocessOutcome } from './types.ts';
import type { SessionLimits, SessionUsage, UsageReporting } from './usage.ts';
import type { InvalidArgument } from './validate.ts';

export { DEFAULT_RUN_OUTPUT_BYTES, MAX_RUN_OUTPUT_BYTES };

/** What a run takes beyond its command. */
export interface RunCommandOptions {
  /** Working directory in the world. @default the world's (see `SpawnRequest`) */
  readonly cwd?: string | undefined;
  /** Entries applied after the world's scrubbed environment; `undefined` removes one. */
  readonly env?: NodeJS.ProcessEnv | undefined;
  /** Bytes for the command's stdin, which is closed after them. @default none: stdin is /dev/null */
  readonly stdin?: string | Uint8Array | undefined;
  /** End the command's process tree after this long (SIGTERM, SIGKILL after the grace); the result says `timedOut`. */
  readonly timeoutMs?: number | undefined;
  /** Ends the process tree as a timeout does, and the run rejects with the signal's reason once nothing of it runs. */
  readonly signal?: AbortSignal | undefined;
  /** Each chunk of stdout as it arrives, every byte whatever `maxOutputBytes` keeps. */
  readonly onStdout?: ((chunk: Uint8Array) => void) | undefined;
  /** Each chunk of stderr as it arrives. */
  readonly onStderr?: ((chunk: Uint8Array) => void) | undefined;
  /** Bytes kept of each stream: its first half and last half. @default {@link DEFAULT_RUN_OUTPUT_BYTES} */
  readonly maxOutputBytes?: number | undefined;
  /** TERM-to-KILL grace of the process tree. @default {@link DEFAULT_GRACE_MS} */
  readonly graceMs?: number | undefined;
  /** The OS user the command runs as, by name or uid (see `SpawnRequest`'s `user`). @default the owner's */
  readonly user?: string | undefined;
  /** What the command's processes may use together (see `SpawnRequest`'s `limits`). @default none asked */
  readonly limits?: SessionLimits | undefined;
}

/** How a run ended, with its output. */
export interface CommandResult {
  /** The exit code, or null when a signal ended the command. */
  exitCode: number | null;
  /** The signal that ended the command, or null. */
  signal: NodeJS.Signals | null;
  /** Stdout as UTF-8 text: all of it, or its head and tail when `truncated.stdout` bytes were cut between them. */
  stdout: string;
  /** Stderr, the same way. */
  stderr: string;
  /** Null when every byte is kept; else the bytes cut from the middle of each stream. */
  truncated: { stdout: number; stderr: number } | null;
  /** The timeout ended the command. */
  timedOut: boolean;
  /** Milliseconds from the start to the end of the run. */
  durationMs: number;
  /** What the command's processes used, where its session's cell keeps counters (a cgroup). */
  usage?: SessionUsage;
}

/**
 * The argv a run's command stands for: an array as it is; a string through the world's shell (`/bin/sh -c`, `cmd.exe /d /s /c` on Windows).
 * @param worldPlatform - the platform of the world that runs it, as its runtime reports it (the daemon's, over one).
 */
export function commandArgv(command: string | readonly string[], worldPlatform: string | undefined, invalid: InvalidArgument): string[] {
  if (typeof command === 'string') {
    if (command.length === 0) throw invalid('command must be a non-empty string');
    return worldPlatform === 'win32' ? ['cmd.exe', '/d', '/s', '/c', command] : ['/bin/sh', '-c', command];
  }
  if (!Array.isArray(command)) throw invalid('command must be a string or an argv array');
  return [...(command as readonly string[])];
}

/** Throws for run options no run could take, naming the field. */
export function assertRunOptions(options: RunCommandOptions, invalid: InvalidArgument): void {
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  const { timeoutMs, maxOutputBytes, stdin } = options;
  if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMER_DELAY_MS)) {
    throw invalid(`timeoutMs must be a positive integer no greater than ${MAX_TIMER_DELAY_MS}, got ${String(timeoutMs)}`);
  }
  if (maxOutputBytes !== undefined && (!Number.isSafeInteger(maxOutputBytes) || maxOutputBytes < 2 || maxOutputBytes > MAX_RUN_OUTPUT_BYTES)) {
    throw invalid(`maxOutputBytes must be an integer from 2 to ${MAX_RUN_OUTPUT_BYTES}, got ${String(maxOutputBytes)}`);
  }
  if (stdin !== undefined && typeof stdin !== 'string' && !(stdin instanceof Uint8Array)) throw invalid('stdin must be a string or bytes');
}

const decoder = new TextDecoder('utf-8', { fatal: false });

/** One stream's bounded output: its first half and last half of `maxBytes`, and a count of the bytes cut between. */
export class OutputCapture {
  readonly #headMax: number;
  readonly #head: Uint8Array[] = [];
  #headBytes = 0;
  readonly #tail: ByteTail;
  #total = 0;

  constructor(maxBytes: number) {
    this.#headMax = Math.floor(maxBytes / 2);
    this.#tail = new ByteTail(maxBytes - this.#headMax);
  }

  /** Takes a chunk (copied: a caller may reuse its memory). */
  push(chunk: Uint8Array): void {
    this.#total += chunk.length;
    let rest = chunk;
    if (this.#headBytes < this.#headMax) {
      const taken = rest.slice(0, this.#headMax - this.#headBytes);
      this.#head.push(taken);
      this.#headBytes += taken.length;
      rest = rest.subarray(taken.length);
    }
    if (rest.length > 0) this.#tail.push(rest.slice());
  }

  /** Bytes cut from the middle. */
  get dropped(): number {
    return this.#total - this.#headBytes - this.#tail.retainedBytes;
  }

  /** The kept bytes as text; head and tail decoded apart when bytes were cut between them. */
  text(): string {
    if (this.dropped === 0) return decoder.decode(concat([...this.#head, ...this.#tail.chunks]));
    return decoder.decode(concat(this.#head)) + decoder.decode(concat(this.#tail.chunks));
  }
}

/** A started process as a run drives it: the seam's handle, or a daemon's process session. */
export interface RunningProcess {
  readonly done: Promise<SubprocessOutcome>;
  /** Calls `onChunk` with each chunk of the stream; resolves once it ended or was abandoned. */
  read(stream: 'stdout' | 'stderr', onChunk: (chunk: Uint8Array) => void): Promise<void>;
  /** Stops reading the streams. */
  abandon(): void;
  terminate(): void;
  waitForExit(): Promise<boolean>;
}

/**
 * Drives a started run to its end: output bounded and streamed, the timeout
 * and the abort ending the tree, and, once the command exited and its output
 * ended (or a grace after its exit, when something it left behind holds the
 * pipes), whatever it left running ended too, so a run leaves nothing behind.
 * @param startedAt - `Date.now()` when the run was asked for.
 * @throws the spawn's failure; the abort signal's reason when it aborted.
 */
export async function finishRun(run: RunningProcess, options: RunCommandOptions, startedAt: number): Promise<CommandResult> {
  const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
  const maxBytes = options.maxOutputBytes ?? DEFAULT_RUN_OUTPUT_BYTES;
  const captures = { stdout: new OutputCapture(maxBytes), stderr: new OutputCapture(maxBytes) };
  let timedOut = false;
  let callbackError: { error: unknown } | undefined;
  const reader = (name: 'stdout' | 'stderr', callback: ((chunk: Uint8Array) => void) | undefined) => (chunk: Uint8Array) => {
    captures[name].push(chunk);
    if (callback === undefined || callbackError !== undefined) return;
    try {
      callback(chunk);
    } catch (error) {
      // A callback that throws ends the run, which rejects with its error.
      callbackError = { error };
      run.terminate();
    }
  };
  const reading = Promise.all([run.read('stdout', reader('stdout', options.onStdout)), run.read('stderr', reader('stderr', options.onStderr))]);
  const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), run.terminate()), options.timeoutMs);
  const signal = options.signal;
  const onAbort = (): void => run.terminate();
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted === true) run.terminate();
  try {
    const outcome = await run.done;
    await within(reading, graceMs);
    // What the command left running (a background job holding the pipes, or not) ends with the run.
    run.terminate();
    await run.waitForExit();
    await within(reading, graceMs);
    if (callbackError !== undefined) throw callbackError.error;
    if (signal?.aborted === true) throw signal.reason;
    const dropped = { stdout: captures.stdout.dropped, stderr: captures.stderr.dropped };
    return {
      exitCode: outcome.exitCode,
      signal: outcome.signal,
      stdout: captures.stdout.text(),
      stderr: captures.stderr.text(),
      truncated: dropped.stdout + dropped.stderr === 0 ? null : dropped,
      timedOut,
      durationMs: Date.now() - startedAt,
    };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    run.abandon();
  }
}

/** Resolves once `promise` settled or `ms` passed. */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([promise.catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** A seam handle as a run drives it: its piped stdout and stderr read to their ends. */
export function runningHandle(handle: SubprocessHandle): RunningProcess {
  const streams = [handle.stdout, handle.stderr];
  return {
    done: handle.done,
    read(name, onChunk) {
      const stream = name === 'stdout' ? handle.stdout : handle.stderr;
      if (stream === undefined) return Promise.resolve();
      return new Promise<void>((resolve) => {
        stream.on('data', (chunk: Uint8Array) => onChunk(chunk));
        stream.once('end', () => resolve());
        stream.once('close', () => resolve());
        // A stream that failed (a lost connection) has nothing more; done says how the run ended.
        stream.once('error', () => resolve());
      });
    },
    abandon() {
      for (const stream of streams) if (stream !== undefined && !stream.destroyed) stream.destroy();
    },
    terminate: () => handle.terminate(),
    waitForExit: () => handle.waitForExit(),
  };
}

/**
 * Runs `command` to completion on a seam runtime: what `run` of the SDK's
 * runtimes does, over their own `spawn`.
 * @param worldPlatform - the world's platform, as its runtime reports it, which picks the shell of a string command.
 */
export async function runCommand(
  spawn: (spec: SpawnRequest) => SubprocessHandle & Partial<UsageReporting>,
  worldPlatform: string | undefined,
  command: string | readonly string[],
  options: RunCommandOptions,
  invalid: InvalidArgument,
): Promise<CommandResult> {
  assertRunOptions(options, invalid);
  const argv = commandArgv(command, worldPlatform, invalid);
  options.signal?.throwIfAborted();
  const startedAt = Date.now();
  const { stdin } = options;
  const handle = spawn({
    argv,
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    ...(options.user === undefined ? {} : { user: options.user }),
    ...(options.limits === undefined ? {} : { limits: options.limits }),
    stdio: { stdin: stdin === undefined ? 'ignore' : typeof stdin === 'string' ? { data: stdin } : 'pipe', stdout: 'pipe', stderr: 'pipe' },
  });
  if (stdin instanceof Uint8Array) {
    // A command that exits without reading its input closes the pipe: not the run's failure.
    handle.stdin?.on('error', () => undefined);
    handle.stdin?.end(stdin);
  }
  const result = await finishRun(runningHandle(handle), options, startedAt);
  const usage = handle.usage?.();
  return usage === undefined ? result : { ...result, usage };
}
