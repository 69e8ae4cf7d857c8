/**
 * A session's usage from the raw counters its containment reads: a cgroup's
 * files on Linux, a Job Object's accounting and limit messages on Windows.
 * Each reads what its platform counts into the same counters; usage over a
 * span (a session's life, one run of a persistent shell) is made here, once.
 * @module
 */
import type { SessionUsage } from '@execworld/sdk/seam';

/** The raw counters usage is made of; each only grows over a session's life but the peak. */
export interface UsageCounters {
  /** CPU time, in milliseconds, not rounded. */
  cpuUserMs: number;
  cpuSystemMs: number;
  /** The most memory the session held at once; null where it is not counted. */
  peakMemoryBytes: number | null;
  /** Processes the kernel's OOM killer killed (Windows has none: a job at its limit fails the allocation). */
  oomKills: number;
  /** Allocations refused at the memory limit. */
  memoryFails: number;
  /** Process creations refused at the pids limit. */
  pidsMax: number;
  /** Periods the cpu limit throttled the session (where it is counted). */
  throttled: number;
}

export const ZERO_COUNTERS: Readonly<UsageCounters> = Object.freeze({
  cpuUserMs: 0,
  cpuSystemMs: 0,
  peakMemoryBytes: null,
  oomKills: 0,
  memoryFails: 0,
  pidsMax: 0,
  throttled: 0,
});

/** Usage from the counters `before` to those of `now`: cpu rounded to the nearest millisecond, the first limit hit (memory, then pids, then cpu). */
export function usageBetween(before: Readonly<UsageCounters>, now: Readonly<UsageCounters>): SessionUsage {
  const memoryHit = now.oomKills > before.oomKills || now.memoryFails > before.memoryFails;
  return {
    cpuUserMs: Math.max(0, Math.round(now.cpuUserMs - before.cpuUserMs)),
    cpuSystemMs: Math.max(0, Math.round(now.cpuSystemMs - before.cpuSystemMs)),
    peakMemoryBytes: now.peakMemoryBytes,
    limitHit: memoryHit ? 'memory' : now.pidsMax > before.pidsMax ? 'pids' : now.throttled > before.throttled ? 'cpu' : null,
    oomKilled: now.oomKills > before.oomKills,
  };
}
