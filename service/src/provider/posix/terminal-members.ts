/**
 * The members of a terminal's session, fenced on identities (pid + start
 * time), and how they are stopped. The handle adopts every process it sees in
 * the top-level process's tree or session, keeps tracking those that reparent
 * away, and never signals a pid whose start time changed.
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SessionCell } from '../containment/containment.ts';
import { CleanupError } from '../errors.ts';
import { cellEmptyWithin } from '../host-terminal.ts';
import { ProcessIndex, type ProcessIdentity, type ProcessInspector, type ProcessRow } from '../inspect/inspector.ts';

/** Poll interval while cleanup waits for processes to go. */
const CLEANUP_POLL_MS = 5;
/** SIGKILL rounds against members forked while earlier ones died. */
const KILL_ROUNDS = 8;
/** Least time a killed cell is given to empty (processes in uninterruptible sleep die late). */
const CELL_KILL_WAIT_MS = 5000;

const identityKey = (identity: ProcessIdentity): string => `${identity.pid}:${identity.started}`;

export class SessionMembers {
  readonly #inspector: ProcessInspector;
  /** Reads the rows the members are found in: the whole table, or a complete cell's processes alone. */
  readonly #rows: () => ProcessRow[];
  /** The top-level process, when its identity could be read at start. */
  readonly #root: ProcessIdentity | undefined;
  readonly #tracked = new Map<string, ProcessIdentity>();
  /** When the top-level process exited, in the inspector's clock ticks. */
  #exitTicks: number | undefined;
  #rootExited = false;

  constructor(inspector: ProcessInspector, root: ProcessIdentity | undefined, rows: () => ProcessRow[]) {
    this.#inspector = inspector;
    this.#root = root;
    this.#rows = rows;
  }

  /** The top-level process exited: from now on, members are adopted only if they started before this. */
  rootExited(): void {
    this.#exitTicks = this.#inspector.nowTicks();
    this.#rootExited = true;
  }

  /**
   * Rescans the process table and returns the tracked members that still live.
   * New members are adopted from the top-level process's tree and session while
   * it is alive; after it exited, from the session members that started before
   * its exit (a process that later gets its pid and starts a session of the same
   * id is younger), and always from the trees of members already tracked.
   */
  refresh(rows?: readonly ProcessRow[]): ProcessIdentity[] {
    const root = this.#root;
    if (root === undefined) return [];
    const index = new ProcessIndex(rows ?? this.#rows());
    const adopt = (identity: ProcessIdentity): void => {
      if (identity.pid !== root.pid) this.#tracked.set(identityKey(identity), identity);
    };
    if (!this.#rootExited && index.has(root)) {
      for (const row of index.tree(root)) adopt(row.identity);
      for (const row of index.rows) if (row.session === root.pid) adopt(row.identity);
    } else if (this.#exitTicks !== undefined) {
      for (const row of index.rows) {
        if (row.session === root.pid && row.startTicks !== undefined && row.startTicks <= this.#exitTicks) adopt(row.identity);
      }
    }
    for (const member of [...this.#tracked.values()]) for (const row of index.tree(member)) adopt(row.identity);
    for (const [key, identity] of this.#tracked) {
      const row = index.get(identity.pid);
      if (row === undefined || !row.alive || row.identity.started !== identity.started) this.#tracked.delete(key);
    }
    return [...this.#tracked.values()];
  }

  /** Sends `signal` to the top-level process while it is the one started; false when its identity is unknown. */
  signalRoot(signal: NodeJS.Signals): boolean {
    if (this.#root === undefined) return false;
    this.#inspector.signalProcess(this.#root, signal);
    return true;
  }

  /** SIGKILL to every member now, awaiting nothing. */
  killAll(): void {
    for (const target of this.refresh()) this.#inspector.signalProcess(target, 'SIGKILL');
  }

  /**
   * TERM, grace, then rounds of KILL to every tracked member, each round taking
   * in the members forked meanwhile. Returns the members that outlived a SIGKILL
   * and its grace; members still being forked by a living ancestor outside the
   * targets (the shell) after the last round are not waited for.
   */
  async stop(graceMs: number): Promise<ProcessIdentity[]> {
    const first = this.refresh();
    for (const target of first) {
      this.#inspector.signalProcess(target, 'SIGTERM');
      this.#inspector.signalProcess(target, 'SIGCONT');
    }
    let survivors = first.length > 0 ? await this.#survivorsAfter(first, graceMs) : [];
    for (let round = 0; round < KILL_ROUNDS; round += 1) {
      // With no member at first nothing was awaited since that reading: a second one now would read the same instant.
      const targets = round === 0 && first.length === 0 ? [] : union(survivors, this.refresh());
      if (targets.length === 0) return [];
      for (const target of targets) this.#inspector.signalProcess(target, 'SIGKILL');
      survivors = await this.#survivorsAfter(targets, graceMs);
      if (survivors.length > 0) return survivors;
    }
    return [];
  }

  async #survivorsAfter(targets: readonly ProcessIdentity[], ms: number): Promise<ProcessIdentity[]> {
    const deadline = Date.now() + ms;
    for (;;) {
      const survivors = targets.filter((target) => this.#inspector.isAlive(target));
      const remaining = deadline - Date.now();
      if (survivors.length === 0 || remaining <= 0) return survivors;
      await sleep(Math.min(CLEANUP_POLL_MS, remaining));
    }
  }
}

/**
 * Ends what a cell still holds once the session's own members are gone:
 * processes that left the session (setsid) and were never tracked. TERM and
 * CONT, the grace, then the whole cell is killed; resolves once it is empty
 * and removed.
 */
export async function emptyCell(cell: SessionCell, graceMs: number): Promise<void> {
  if (!cell.isEmpty()) {
    for (const pid of cell.pids()) {
      // A pid read from the cell names another process only if its number came round between the read and the signal.
      for (const signal of ['SIGTERM', 'SIGCONT'] as const) {
        try {
          process.kill(pid, signal);
        } catch (_error) {
          // Gone meanwhile.
        }
      }
    }
    if (!(await cellEmptyWithin(cell, graceMs))) {
      cell.kill();
      if (!(await cellEmptyWithin(cell, Math.max(graceMs, CELL_KILL_WAIT_MS)))) {
        const pids = cell.pids();
        throw new CleanupError(`terminal cleanup failed; surviving pids: ${pids.join(', ')}`, pids);
      }
    }
  }
  cell.remove();
}

export function survivorsError(survivors: readonly ProcessIdentity[]): CleanupError {
  const pids = survivors.map((target) => target.pid);
  return new CleanupError(`terminal cleanup failed; surviving pids: ${pids.join(', ')}`, pids);
}

export function union(a: readonly ProcessIdentity[], b: readonly ProcessIdentity[]): ProcessIdentity[] {
  const all = new Map<string, ProcessIdentity>();
  for (const identity of [...a, ...b]) all.set(identityKey(identity), identity);
  return [...all.values()];
}
