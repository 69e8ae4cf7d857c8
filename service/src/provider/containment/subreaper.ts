/**
 * Containment without cgroups (Linux): the host process is a child
 * subreaper, so a session's descendant whose parent dies is reparented to the
 * host instead of init. Each session tracks, by identity (pid + start time),
 * what it was seen to start: the tree of its top-level process, the members
 * of process groups and POSIX sessions led by its processes, and the trees of
 * everything tracked, which it keeps when they reparent away.
 *
 * A process that leaves the tree before any scan saw it (`setsid -f` forks and
 * its parent exits at once) reaches the host as an orphan nobody tracked. With
 * `claimOrphans` (a host that starts children only through its runtimes, such
 * as the daemon) such an orphan is given to the one session that was running
 * when it started, or, of several, to the one whose pipes or terminal it still
 * holds as its stdio. Otherwise it waits until only one of them is left, and
 * is killed once none is.
 *
 * Node reaps only the children it spawned; the zombies of adopted orphans are
 * reaped here, by pid, and only those known to be a session's (never a
 * session's top-level process, whose exit Node or node-pty collects).
 * @module
 */
import { readlinkSync } from 'node:fs';
import { becomeChildSubreaper, reapIfExited } from '../posix/libc.ts';
import { ProcessIndex, type ProcessIdentity, type ProcessInspector } from '../inspect/inspector.ts';
import { LinuxInspector } from '../inspect/linux.ts';
import type { Containment, ContainmentRecovery, MembersListener } from './containment.ts';
import { identityKey, sessionOwned, SubreaperCell, type CellHost } from './subreaper-cell.ts';

/** How often the process table is scanned while a session is contained. */
const SCAN_INTERVAL_MS = 250;
/** A check of emptiness or members rescans at most this often, unless it must. */
const FRESH_SCAN_MS = 100;

export type { MembersListener } from './containment.ts';

export interface SubreaperContainmentOptions {
  /** @default the Linux /proc inspector */
  readonly inspector?: ProcessInspector;
  /**
   * The host starts children only through its runtimes: any orphan reparented
   * to it is a session's. Without it, only processes seen in a session's tree
   * are attributed. @default false
   */
  readonly claimOrphans?: boolean;
  /** Test hook: the prctl call. @default becomeChildSubreaper */
  readonly becomeSubreaper?: () => boolean;
  /** Test hook: the waitpid(WNOHANG) call. @default reapIfExited */
  readonly reap?: (pid: number) => boolean;
  /** Test hook: what fds 0-2 of a process refer to. @default read from /proc/<pid>/fd */
  readonly stdioOf?: (pid: number) => string[];
}

/** What fds 0-2 of `pid` refer to (`pipe:[123]`, `/dev/pts/4`, …); those unreadable are left out. */
function procStdio(pid: number): string[] {
  const targets: string[] = [];
  for (const fd of [0, 1, 2]) {
    try {
      targets.push(readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch (_error) {
      // Closed, or the process is gone.
    }
  }
  return targets;
}

export class SubreaperContainment implements Containment, CellHost {
  readonly mode = 'subreaper' as const;
  /** See {@link SubreaperContainmentOptions.claimOrphans}; only ever turned on. */
  claimOrphans: boolean;
  readonly #inspector: ProcessInspector;
  readonly #listeners = new Set<MembersListener>();
  /** The journal follows each session's members: a later start ends those that still run. */
  readonly recovery: ContainmentRecovery = { watchMembers: (listener) => this.watchMembers(listener) };
  readonly #reap: (pid: number) => boolean;
  /** @internal */
  readonly stdioOf: (pid: number) => string[];
  readonly #cells = new Set<SubreaperCell>();
  /** Top-level processes of every cell, kept until they left the table: never reaped or claimed here. */
  readonly #roots = new Map<string, ProcessIdentity>();
  /** Children of this process that are no session's (the session watcher): never claimed, killed or reaped here. */
  readonly #spared = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #lastScan = 0;
  /** When this process became a subreaper, in ticks: an older child was not started by a session. */
  readonly #sinceTicks: number | undefined;

  /** @throws when this process cannot be made a child subreaper. */
  constructor(options: SubreaperContainmentOptions = {}) {
    if (!(options.becomeSubreaper ?? becomeChildSubreaper)()) throw new Error('this process cannot be made a child subreaper');
    this.#inspector = options.inspector ?? new LinuxInspector();
    this.claimOrphans = options.claimOrphans ?? false;
    this.#reap = options.reap ?? reapIfExited;
    this.stdioOf = options.stdioOf ?? procStdio;
    const now = this.#inspector.nowTicks();
    this.#sinceTicks = now === undefined ? undefined : now - 2;
  }

  create(sessionKey: string): SubreaperCell {
    const cell = new SubreaperCell(this, sessionKey, this.#inspector);
    this.#cells.add(cell);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.scan(), SCAN_INTERVAL_MS);
      this.#timer.unref();
    }
    return cell;
  }

  /**
   * Calls `listener` with a cell's live members whenever they change, and with
   * undefined once the cell is removed. Returns the function that stops it.
   */
  watchMembers(listener: MembersListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * A child of this process that is none of the sessions': it is never taken
   * for an orphan of one, nor killed or reaped here (Node collects its exit).
   */
  spare(identity: ProcessIdentity): void {
    this.#spared.add(identityKey(identity));
  }

  /** Spares the child `pid`, identified at once: before any scan could see it as an orphan to claim. */
  helperStarted(pid: number): void {
    const identity = this.#inspector.identity(pid);
    if (identity !== undefined) this.spare(identity);
  }

  /** @internal */
  addRoot(cell: SubreaperCell, identity: ProcessIdentity): void {
    this.#roots.set(identityKey(identity), identity);
    this.#report(cell);
  }

  /** @internal */
  release(cell: SubreaperCell): void {
    if (!this.#cells.has(cell)) return;
    // What it leaves behind as zombies is reaped before it is forgotten.
    this.scan();
    this.#cells.delete(cell);
    for (const listener of this.#listeners) listener(cell.key, undefined);
    if (this.#cells.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** Scans unless a scan ran within FRESH_SCAN_MS. */
  scanIfStale(): void {
    if (Date.now() - this.#lastScan >= FRESH_SCAN_MS) this.scan();
  }

  /**
   * One reading of the process table: every cell takes in what it now owns,
   * orphans are attributed, and the zombies of session processes are reaped.
   */
  scan(): void {
    this.#lastScan = Date.now();
    let index = new ProcessIndex(this.#inspector.snapshot());
    for (const cell of this.#cells) cell.update(index);
    if (this.#reapZombies(index)) index = new ProcessIndex(this.#inspector.snapshot());
    if (this.claimOrphans) this.#claimOrphans(index);
    for (const [key, root] of this.#roots) if (!index.has(root)) this.#roots.delete(key);
    for (const cell of this.#cells) this.#report(cell);
  }

  #report(cell: SubreaperCell): void {
    const members = cell.changedMembers();
    if (members !== undefined) for (const listener of this.#listeners) listener(cell.key, members);
  }

  /** Reaps zombie children of this process that are sessions' processes; true when one was. */
  #reapZombies(index: ProcessIndex): boolean {
    const self = process.pid;
    let reaped = false;
    for (const row of index.rows) {
      if (row.alive || row.ppid !== self || this.#roots.has(identityKey(row.identity)) || this.#spared.has(identityKey(row.identity))) continue;
      const ours = this.claimOrphans || [...this.#cells].some((cell) => cell.tracks(row.identity));
      if (ours && this.#reap(row.identity.pid)) reaped = true;
    }
    return reaped;
  }

  #claimOrphans(index: ProcessIndex): void {
    const self = process.pid;
    for (const row of index.rows) {
      if (!row.alive || row.ppid !== self || this.#roots.has(identityKey(row.identity)) || this.#spared.has(identityKey(row.identity))) continue;
      if ([...this.#cells].some((cell) => cell.tracks(row.identity))) continue;
      // Children this process had before it was a subreaper (started by whatever exec'd it) are not sessions'.
      if (this.#sinceTicks !== undefined && row.startTicks !== undefined && row.startTicks < this.#sinceTicks) continue;
      // The sessions that were already running when it started.
      let candidates = [...this.#cells].filter((cell) => cell.startedBy(row));
      if (candidates.length > 1) {
        // Of several, the one whose pipes or terminal it holds as its stdio.
        const stdio = this.stdioOf(row.identity.pid).filter(sessionOwned);
        const holders = candidates.filter((cell) => cell.holdsAny(stdio));
        if (holders.length === 1) candidates = holders;
      }
      if (candidates.length === 1) candidates[0]!.claim(row, index);
      // None: every session that could have started it has ended, and so must it.
      else if (candidates.length === 0) this.#inspector.signalProcess(row.identity, 'SIGKILL');
    }
  }
}

let host: SubreaperContainment | undefined;

/**
 * This process's subreaper containment, made on first use and shared by every
 * runtime of the process (being a subreaper is a property of the process).
 * `claimOrphans`, once asked for, stays on.
 * @throws when this process cannot be made a child subreaper.
 */
export function hostSubreaperContainment(options: { claimOrphans?: boolean } = {}): SubreaperContainment {
  host ??= new SubreaperContainment();
  if (options.claimOrphans === true) host.claimOrphans = true;
  return host;
}
