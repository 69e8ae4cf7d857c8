/**
 * The subprocess seam: what a provider of process execution and terminals
 * offers to the code above it. These types are structurally identical to
 * `@deepseek-ai/dsh-subprocess@0.1.0-rc.8` (a type-level test keeps them so),
 * which lets a harness written against that package run over any execworld
 * runtime, local or remote.
 *
 * The seam applies no defaults: every disposition, limit, size and directory
 * arrives on the spec.
 * @module
 */
import type { Readable, Writable } from 'node:stream';

/** Prefix of the environment names a harness owns (`DSH_SHELL`, `DSH_SESSION_ID`, ...). */
export const DSH_ENV_PREFIX = 'DSH_' as const;

/** One environment name in the harness-owned namespace. */
export type DshEnvironmentKey = `${typeof DSH_ENV_PREFIX}${string}`;

/** Harness-owned environment facts for one child. */
export type DshEnvironment = Readonly<Record<DshEnvironmentKey, string>>;

/** The final batch view of one collected stream. */
export interface CollectedOutput {
  /** The retained text: the tail of the stream when bytes were dropped. */
  text: string;
  /** True when bytes were dropped from the head of `text`. */
  truncated: boolean;
  /** A file holding the whole stream, when one was kept intact. */
  spillPath?: string;
}

/**
 * What the child's fd 0 is: `'ignore'` is `/dev/null` (reads see EOF at once),
 * `'pipe'` exposes {@link SubprocessHandle.stdin}, `{ data }` writes the bytes
 * and closes stdin.
 */
export type SubprocessStdinMode = 'ignore' | 'pipe' | { readonly data: string };

/**
 * Bounded collection of one output stream: an in-memory tail of `maxBytes`,
 * and optionally a spill file with the whole stream while it stays within
 * `spill.maxBytes`.
 */
export interface SubprocessCollect {
  /** Bytes of tail kept in memory; older bytes are dropped from the head. */
  maxBytes: number;
  /** Whole-stream spill file; without it only the tail is kept. */
  spill?: {
    /** Longest stream the spill file may hold; a longer stream discards it. */
    maxBytes: number;
  };
}

/** What the child's fd 1 / fd 2 is: a raw pipe, the provider's own fd, or bounded collection. */
export type SubprocessOutputMode = 'pipe' | 'inherit' | SubprocessCollect;

/** The three stdio dispositions; all are required. */
export interface SubprocessStdio {
  stdin: SubprocessStdinMode;
  stdout: SubprocessOutputMode;
  stderr: SubprocessOutputMode;
}

/** A fully specified request to start one managed process tree. */
export interface SubprocessSpawnSpec {
  /** The program and its arguments; `argv[0]` is the program and nothing is shell-interpreted. */
  argv: readonly string[];
  /** Working directory in the provider's execution world. */
  cwd: string;
  /** Stdio dispositions. */
  stdio: SubprocessStdio;
  /**
   * Milliseconds between SIGTERM and SIGKILL in {@link SubprocessHandle.terminate},
   * and the longest wait for collected pipes held open by descendants after the
   * direct child exits. Finite, positive, at most 2^31-1.
   */
  graceMs: number;
  /** Aborting it starts {@link SubprocessHandle.terminate}; aborted before spawn, spawn throws. */
  signal?: AbortSignal | undefined;
  /**
   * Entries applied after the provider's scrub of its ambient environment:
   * a string sets the entry, `undefined` removes an ambient one.
   */
  env?: NodeJS.ProcessEnv | undefined;
}

/** How a process ended, in the vocabulary of Node's `close` event. */
export interface SubprocessOutcome {
  /** The exit code, or null when a signal ended the process. */
  exitCode: number | null;
  /** The signal that ended the process, or null on a normal exit. */
  signal: NodeJS.Signals | null;
}

/** The result of one {@link SubprocessOutputReader.readFrom}. */
export interface SubprocessOutputRead {
  /** Text from the requested offset, or the whole retained tail when `lossy`. */
  text: string;
  /** Total bytes seen so far: the offset to read from next. */
  nextOffset: number;
  /** True when the requested offset is older than the retained tail. */
  lossy: boolean;
  /** The whole-stream spill file, while one exists and is intact. */
  spillPath?: string;
}

/** Non-consuming, offset-addressed reads of one collected stream. */
export interface SubprocessOutputReader {
  /**
   * Everything captured since the whole-stream byte offset `fromByte`.
   * @param fromByte - a previous read's `nextOffset`, or 0.
   */
  readFrom(fromByte: number): SubprocessOutputRead;
}

/** Readers of the streams spawned in collect mode. */
export interface SubprocessCollectedOutputs {
  /** Present exactly when stdout is collected. */
  readonly stdout?: SubprocessOutputReader;
  /** Present exactly when stderr is collected. */
  readonly stderr?: SubprocessOutputReader;
}

/** A live managed process tree. */
export interface SubprocessHandle {
  /** Pid of the tree root; -1 when the spawn failed. */
  readonly pid: number;
  /** Present exactly when stdin is `'pipe'`. */
  readonly stdin: Writable | undefined;
  /** Present exactly when stdout is `'pipe'`. */
  readonly stdout: Readable | undefined;
  /** Present exactly when stderr is `'pipe'`. */
  readonly stderr: Readable | undefined;
  /** Readers of collected streams; they stay readable after exit. */
  readonly collected: SubprocessCollectedOutputs;
  /** Resolves with the exit facts at close; rejects only when the spawn itself failed. */
  readonly done: Promise<SubprocessOutcome>;
  /**
   * SIGTERM to the whole tree, then SIGKILL after `graceMs` if it still lives.
   * Idempotent, never throws, and does nothing once the tree is known gone.
   */
  terminate(): void;
  /**
   * Resolves true once the whole tree is gone, false when `signal` aborts first.
   * Never sends a signal.
   */
  waitForExit(signal?: AbortSignal): Promise<boolean>;
}

/** Signals a terminal's foreground group may be sent. */
export type SubprocessTerminalSignal = 'SIGINT' | 'SIGTERM' | 'SIGKILL' | 'SIGTSTP' | 'SIGHUP';

/** A fully specified request to start one process on a new terminal. */
export interface SubprocessTerminalSpawnSpec {
  /** The program and its arguments; `argv[0]` is the program. */
  argv: readonly string[];
  /** Working directory in the provider's execution world. */
  cwd: string;
  /** Entries applied after the provider's scrub of its ambient environment. */
  env?: Record<string, string> | undefined;
  /** Initial rows. */
  rows: number;
  /** Initial columns. */
  cols: number;
  /** Grace between the TERM and KILL tiers of the terminal session's cleanup. */
  graceMs: number;
  /** Cancels allocation only; a published terminal owns its lifetime. */
  signal?: AbortSignal | undefined;
}

/** The terminal's current foreground process group. */
export interface SubprocessTerminalForeground {
  /** The group the terminal driver reports in the foreground. */
  processGroupId: number;
  /** True only when the provider can prove the group is blocked reading the terminal. */
  inputWaiting: boolean;
}

/** A live terminal and the session of processes it owns. */
export interface SubprocessTerminalHandle {
  /** Pid of the terminal's top-level process. */
  readonly pid: number;
  /** Output bytes in order; ends after the last queued byte once the top-level process exits. */
  readonly output: Readable;
  /** Resolves when the top-level process exits; rejects only when the transport fails. */
  readonly done: Promise<SubprocessOutcome>;
  /** Writes text to the terminal's input as is. */
  write(data: string): Promise<void>;
  /** The foreground group and whether it waits for input; undefined when none can be resolved. */
  inspectForeground(): Promise<SubprocessTerminalForeground | undefined>;
  /** Sends a signal to the foreground group and resolves that group's id. */
  signalForeground(signal: SubprocessTerminalSignal): Promise<number>;
  /**
   * Ends every member of the terminal's session that can still be observed and
   * resolves once they are gone. Idempotent while in flight, retryable after a failure.
   */
  terminate(): Promise<void>;
}

/** A provider of the seam: executable lookup, managed process trees and terminals. */
export interface SubprocessRuntime {
  /**
   * Resolves a command to an executable path in the execution world.
   * @param command - an absolute path, or a bare name looked up on PATH.
   * @param env - explicit entries applied after the scrub, used for the lookup.
   * @param signal - aborts the lookup; the rejection is exactly `signal.reason`.
   */
  resolveExecutable(command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<string>;
  /** Starts a managed process tree; returns at once. */
  spawn(spec: SubprocessSpawnSpec): SubprocessHandle;
  /** Starts a process on a new terminal; resolves once allocation succeeded. */
  spawnTerminal(spec: SubprocessTerminalSpawnSpec): Promise<SubprocessTerminalHandle>;
}
