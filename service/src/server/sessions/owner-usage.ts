/**
 * What each owner's sessions used, for the daemon's metrics: cpu seconds,
 * the sessions that ran into each limit, OOM kills, and memory in use now.
 *
 * An owner's total is what its forgotten sessions left plus what the sessions
 * the registry still holds read now. A session counts in one of the two,
 * never both: it moves from the second to the first when it is forgotten,
 * with the counters it had then. Each session's counters are kept at the
 * highest ever read (a cgroup's counters only grow; a read that fails, or the
 * cell's last counters after its cgroups went, must not take a total down),
 * so the totals, which Prometheus takes as counters, never go down.
 *
 * Cost: a scrape reads the counters of each session once, a few small cgroup
 * files of a running one; a session whose cgroups are gone is answered from
 * the counters its cell kept, with no read.
 * @module
 */
import type { SessionAccounting } from '../../provider/api.ts';

export type LimitHit = 'memory' | 'pids' | 'cpu';

/** One owner's usage. */
export interface OwnerUsage {
  cpuUserMs: number;
  cpuSystemMs: number;
  /** Sessions that ran into each limit. */
  limitHits: Record<LimitHit, number>;
  oomKills: number;
  /** Memory in use now by the owner's running sessions; null where no memory controller follows any. */
  memoryBytes: number | null;
}

/** What the ledger needs of a session. */
export interface AccountedSession {
  readonly owner: string;
  /** Undefined while the session runs. */
  readonly finishedAt: Date | undefined;
  readonly handle: { accounting?(): SessionAccounting | undefined };
}

export function emptyUsage(): OwnerUsage {
  return { cpuUserMs: 0, cpuSystemMs: 0, limitHits: { memory: 0, pids: 0, cpu: 0 }, oomKills: 0, memoryBytes: null };
}

/** Adds `session`'s counters to `total`; its memory only while it runs. */
function add(total: OwnerUsage, session: SessionAccounting, running: boolean): void {
  total.cpuUserMs += session.cpuUserMs;
  total.cpuSystemMs += session.cpuSystemMs;
  for (const limit of session.limitsHit) total.limitHits[limit] += 1;
  total.oomKills += session.oomKills;
  if (running && session.memoryBytes !== null) total.memoryBytes = (total.memoryBytes ?? 0) + session.memoryBytes;
}

export class OwnerUsageLedger {
  /** Per owner, the counters of its sessions that were forgotten. */
  readonly #forgotten = new Map<string, OwnerUsage>();
  /** Per session held, the highest counters read. */
  readonly #highest = new WeakMap<AccountedSession, SessionAccounting>();

  /** The session's counters now, never below any read before; undefined where its cell keeps none. */
  #read(session: AccountedSession): SessionAccounting | undefined {
    const now = session.handle.accounting?.();
    const before = this.#highest.get(session);
    if (now === undefined) return before;
    const highest =
      before === undefined
        ? now
        : {
            cpuUserMs: Math.max(before.cpuUserMs, now.cpuUserMs),
            cpuSystemMs: Math.max(before.cpuSystemMs, now.cpuSystemMs),
            memoryBytes: now.memoryBytes,
            limitsHit: [...new Set([...before.limitsHit, ...now.limitsHit])],
            oomKills: Math.max(before.oomKills, now.oomKills),
          };
    this.#highest.set(session, highest);
    return highest;
  }

  /** A session leaves the registry: its counters stay in its owner's totals. */
  forget(session: AccountedSession): void {
    const last = this.#read(session);
    if (last === undefined) return;
    let total = this.#forgotten.get(session.owner);
    if (total === undefined) this.#forgotten.set(session.owner, (total = emptyUsage()));
    add(total, last, false);
    this.#highest.delete(session);
  }

  /** Each owner's usage: its forgotten sessions' and those of `held`, the sessions the registry holds now. */
  totals(held: Iterable<AccountedSession>): Map<string, OwnerUsage> {
    const totals = new Map<string, OwnerUsage>();
    for (const [owner, forgotten] of this.#forgotten) totals.set(owner, { ...forgotten, limitHits: { ...forgotten.limitHits } });
    for (const session of held) {
      const counters = this.#read(session);
      if (counters === undefined) continue;
      let total = totals.get(session.owner);
      if (total === undefined) totals.set(session.owner, (total = emptyUsage()));
      add(total, counters, session.finishedAt === undefined);
    }
    return totals;
  }
}
