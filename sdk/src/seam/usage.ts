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

/** A terminal that can measure one run in it: a local runtime's, whose cell it reads. */
export interface UsageMetering {
  /** Starts measuring a run; undefined where no cell keeps counters. */
  usageMeter(): UsageMeter | undefined;
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
