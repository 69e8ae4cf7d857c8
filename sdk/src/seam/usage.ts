/**
 * What a session may use and what it used: the `limits` a spawn, terminal or
 * shell takes, and the `usage` its end reports, in the wire's form (the
 * protocol's `SessionLimits` and `SessionUsage` schemas are checked against
 * these types). Both runtimes take and answer them: the local one from its
 * session's cgroups, the remote one from the daemon's answers.
 * @module
 */

/** What a session's processes may use, all together; a runtime that cannot enforce one refuses the create naming it. */
export interface SessionLimits {
  /** Bytes of memory (and swap) the processes may use together; past it the kernel's OOM killer ends one of them. */
  readonly memoryBytes?: number | undefined;
  /** Processes and threads the session may hold at once; a fork past it fails (EAGAIN). */
  readonly pids?: number | undefined;
  /** Cores the session may use, fractional (0.25: a quarter of one core). */
  readonly cpu?: number | undefined;
}

/** What a session's processes used, all together, from its start. */
export interface SessionUsage {
  readonly cpuUserMs: number;
  readonly cpuSystemMs: number;
  /** The peak of the memory its processes used together; null where no memory controller follows it. */
  readonly peakMemoryBytes: number | null;
  /** The limit it ran into (memory first, then pids, then cpu: it was throttled), or null. */
  readonly limitHit: 'memory' | 'pids' | 'cpu' | null;
  /** The kernel's OOM killer ended one of its processes: a SIGKILL of its own kind. */
  readonly oomKilled: boolean;
}

/** A shell run's usage: cpu and the limits hit over the run; `peakScope` says whether the peak is the run's or the shell's so far. */
export type RunUsage = SessionUsage & { readonly peakScope: 'run' | 'session' };

/** `limits` on a create, beyond the seam's specs. */
export interface LimitsRequest {
  /** @default none asked: a daemon's --default-session-* settings, a local runtime's nothing */
  limits?: SessionLimits | undefined;
}

/** One run's usage in a long-lived session (a persistent shell's command), measured from when it was started. */
export interface UsageMeter {
  usage(): RunUsage;
  /** Ends the run: what the meter holds open (a descriptor of cgroup v2's `memory.peak`) is closed, its last figures kept. */
  close(): void;
}

/**
 * A meter whose figures come by a call: a remote terminal's, which asks the
 * daemon for its session's usage so far. Undefined where the answer carried
 * none (the terminal is gone, or no cell counts it).
 */
export interface AskingUsageMeter {
  usage(): Promise<RunUsage | undefined>;
  /** Ends the run: later calls answer its last figures without asking again. */
  close(): void;
}

/** A terminal that can measure one run in it: a local runtime's, whose cell it reads, and a remote one's, which asks the daemon. */
export interface UsageMetering {
  /**
   * Starts measuring a run; undefined where no cell keeps counters. A remote
   * terminal's meter comes once the daemon answered the usage at the start.
   */
  usageMeter(): UsageMeter | AskingUsageMeter | undefined;
}

/**
 * One run's usage from its session's usage at its start and at its end, where
 * nothing resets a peak for the run: cpu is the difference, the peak is the
 * session's (`peakScope: 'session'`), and a limit counts as hit in the run
 * when the session's `limitHit` changed over it, and oomKilled when it became
 * true. A session's `limitHit` names only the first of memory, pids and cpu
 * it ever hit, so a limit the session had already hit before the run (or one
 * behind it in that order) is not seen again: such a run reports null.
 */
export function usageSince(start: SessionUsage, end: SessionUsage): RunUsage {
  return {
    cpuUserMs: Math.max(0, end.cpuUserMs - start.cpuUserMs),
    cpuSystemMs: Math.max(0, end.cpuSystemMs - start.cpuSystemMs),
    peakMemoryBytes: end.peakMemoryBytes,
    limitHit: end.limitHit === start.limitHit ? null : end.limitHit,
    oomKilled: end.oomKilled && !start.oomKilled,
    peakScope: 'session',
  };
}

/** A handle that reports what its session used. */
export interface UsageReporting {
  /**
   * What the session used: read from its cell while it runs (a local
   * runtime), and once it ended what its end reported. Undefined where no
   * cell keeps counters (no cgroup), or, remotely, before its end.
   */
  usage(): SessionUsage | undefined;
}
