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
import { becomeChildSubreaper, reapIfExited } from '../libc.ts';
import { ProcessIndex, type ProcessIdentity, type ProcessInspector, type ProcessRow } from '../inspect/inspector.ts';
import { LinuxInspector } from '../inspect/linux.ts';
import type { Containment, SessionCell } from './containment.ts';

/** How often the process table is scanned while a session is contained. */
const SCAN_INTERVAL_MS = 250;
/** A check of emptiness or members rescans at most this often, unless it must. */
const FRESH_SCAN_MS = 100;
/** SIGKILL rounds of a cell kill, against members forked while earlier ones died. */
const KILL_ROUNDS = 4;

const identityKey = (identity: ProcessIdentity): string => `${identity.pid}:${identity.started}`;

/** Told a cell's live members, or undefined once the cell is removed. */
export type MembersListener = (key: string, members: readonly ProcessIdentity[] | undefined) => void;

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

/** Whether a stdio target belongs to one session alone: its pipes, sockets and terminal, not /dev/null or a file. */
const sessionOwned = (target: string): boolean => /^(pipe|socket):\[\d+\]$/.test(target) || /^\/dev\/pts\/\d+$/.test(target);

export class SubreaperContainment implements Containment {
  readonly mode = 'subreaper' as const;
  /** See {@link SubreaperContainmentOptions.claimOrphans}; only ever turned on. */
  claimOrphans: boolean;
  readonly #inspector: ProcessInspector;
  readonly #listeners = new Set<MembersListener>();
  readonly #reap: (pid: number) => boolean;
  /** @internal */
  readonly stdioOf: (pid: number) => string[];
  readonly #cells = new Set<SubreaperCell>();
  /** Top-level processes of every cell, kept until they left the table: never reaped or claimed here. */
  readonly #roots = new Map<string, ProcessIdentity>();
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
      if (row.alive || row.ppid !== self || this.#roots.has(identityKey(row.identity))) continue;
      const ours = this.claimOrphans || [...this.#cells].some((cell) => cell.tracks(row.identity));
      if (ours && this.#reap(row.identity.pid)) reaped = true;
    }
    return reaped;
  }

  #claimOrphans(index: ProcessIndex): void {
    const self = process.pid;
    for (const row of index.rows) {
      if (!row.alive || row.ppid !== self || this.#roots.has(identityKey(row.identity))) continue;
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

class SubreaperCell implements SessionCell {
  readonly key: string;
  readonly #containment: SubreaperContainment;
  readonly #inspector: ProcessInspector;
  readonly #roots: { identity: ProcessIdentity; startTicks: number | undefined }[] = [];
  /** Every process seen to be the session's, the roots excepted, zombies until they are gone. */
  readonly #tracked = new Map<string, ProcessRow>();
  /** Process groups and POSIX sessions led by the cell's processes that had members at the last scan. */
  #ledGroups = new Set<number>();
  /** When the cell was made, in the inspector's ticks: a process that started earlier is not its. */
  readonly #createdTicks: number | undefined;
  /** The pipes and terminal the top-level process got as its stdio, read once it had them. */
  #stdio: Set<string> | undefined;
  #recorded = '';
  #removed = false;

  constructor(containment: SubreaperContainment, key: string, inspector: ProcessInspector) {
    this.#containment = containment;
    this.key = key;
    this.#inspector = inspector;
    // One tick of slack: start times are rounded to ticks.
    const now = inspector.nowTicks();
    this.#createdTicks = now === undefined ? undefined : now - 2;
  }

  spawnInside<T>(spawn: () => T): T {
    // Nothing to enter: the process is found by its identity once attached.
    return spawn();
  }

  attach(pid: number, stdio?: readonly string[]): void {
    const identity = this.#inspector.identity(pid);
    if (identity === undefined) return;
    // A spawned process has its stdio once spawn returned (Node waits for the exec).
    const owned = (stdio ?? this.#containment.stdioOf(pid)).filter(sessionOwned);
    if (owned.length > 0) this.#stdio = new Set(owned);
    const startTicks = Number(identity.started);
    this.#roots.push({ identity, startTicks: Number.isSafeInteger(startTicks) ? startTicks : undefined });
    // Reported at once: a host killed right now must find it at its next start.
    this.#containment.addRoot(this, identity);
  }

  isEmpty(): boolean {
    if (this.#removed) return true;
    this.#containment.scanIfStale();
    if (this.#anyAlive()) return false;
    // What the last member forked just before it died is found only by a fresh scan.
    this.#containment.scan();
    return !this.#anyAlive();
  }

  pids(): number[] {
    if (this.#removed) return [];
    this.#containment.scan();
    return this.#liveMembers().map((identity) => identity.pid);
  }

  kill(): void {
    if (this.#removed) return;
    for (let round = 0; round < KILL_ROUNDS; round += 1) {
      this.#containment.scan();
      const targets = this.#liveMembers();
      if (targets.length === 0) return;
      for (const target of targets) this.#inspector.signalProcess(target, 'SIGKILL');
    }
  }

  remove(): void {
    if (this.#removed) return;
    this.#removed = true;
    this.#containment.release(this);
  }

  /** @internal Whether `identity` is one of this cell's processes (roots excepted). */
  tracks(identity: ProcessIdentity): boolean {
    return this.#tracked.get(identityKey(identity))?.identity.started === identity.started;
  }

  /** @internal Whether `row` started while this cell was running, so that it may be this cell's. */
  startedBy(row: ProcessRow): boolean {
    if (this.#createdTicks === undefined || row.startTicks === undefined) return true;
    return row.startTicks >= this.#createdTicks;
  }

  /** @internal Whether any of `targets` is one of the session's own pipes or its terminal. */
  holdsAny(targets: readonly string[]): boolean {
    return this.#stdio !== undefined && targets.some((target) => this.#stdio!.has(target));
  }

  /** @internal Takes in an orphan attributed to this cell, and its tree. */
  claim(row: ProcessRow, index: ProcessIndex): void {
    this.#track(row);
    for (const member of index.tree(row.identity)) this.#track(member);
  }

  /** @internal Takes in what the cell now owns in `index`; forgets what is gone. */
  update(index: ProcessIndex): void {
    for (;;) {
      const before = this.#tracked.size;
      const leaders: ProcessRow[] = [];
      for (const root of this.#roots) {
        const row = index.get(root.identity.pid);
        if (row !== undefined && row.identity.started === root.identity.started) {
          // Read at the first scan after the spawn: by then the child has set up its stdio.
          if (this.#stdio === undefined && row.alive) {
            const stdio = this.#containment.stdioOf(root.identity.pid).filter(sessionOwned);
            if (stdio.length > 0) this.#stdio = new Set(stdio);
          }
          for (const member of index.tree(root.identity)) if (member.identity.pid !== root.identity.pid) this.#track(member);
          leaders.push(row);
        } else {
          leaders.push({ identity: root.identity, ppid: 0, pgrp: undefined, session: undefined, alive: false, startTicks: root.startTicks });
        }
      }
      for (const tracked of [...this.#tracked.values()]) {
        if (!index.has(tracked.identity)) continue;
        for (const member of index.tree(tracked.identity)) this.#track(member);
        leaders.push(tracked);
      }
      this.#adoptLedMembers(index, leaders);
      if (this.#tracked.size === before) break;
    }
    for (const [key, tracked] of this.#tracked) {
      const row = index.get(tracked.identity.pid);
      if (row === undefined || row.identity.started !== tracked.identity.started) this.#tracked.delete(key);
      else this.#tracked.set(key, row);
    }
  }

  /**
   * Members of the process groups and sessions the cell's processes lead. The
   * id of a group or session is not reused while it has members, so a group
   * seen with members at the last scan, or whose leader is still in the
   * table, is still the cell's.
   */
  #adoptLedMembers(index: ProcessIndex, leaders: readonly ProcessRow[]): void {
    const ids = new Map<number, number | undefined>();
    for (const leader of leaders) {
      const inTable = index.has(leader.identity);
      if (inTable || this.#ledGroups.has(leader.identity.pid)) ids.set(leader.identity.pid, leader.startTicks);
    }
    const populated = new Set<number>();
    for (const row of index.rows) {
      for (const id of [row.pgrp, row.session]) {
        if (id === undefined || !ids.has(id) || id === row.identity.pid) continue;
        const leaderStart = ids.get(id);
        if (leaderStart !== undefined && row.startTicks !== undefined && row.startTicks < leaderStart) continue;
        populated.add(id);
        this.#track(row);
      }
    }
    this.#ledGroups = populated;
  }

  /** The live members when they changed since they were last reported, else undefined. */
  changedMembers(): ProcessIdentity[] | undefined {
    const members = this.#liveMembers();
    const text = members.map(identityKey).sort().join(',');
    if (text === this.#recorded) return undefined;
    this.#recorded = text;
    return members;
  }

  #track(row: ProcessRow): void {
    if (this.#roots.some((root) => root.identity.pid === row.identity.pid && root.identity.started === row.identity.started)) return;
    this.#tracked.set(identityKey(row.identity), row);
  }

  #liveMembers(): ProcessIdentity[] {
    const roots = this.#roots.map((root) => root.identity).filter((identity) => this.#inspector.isAlive(identity));
    const tracked = [...this.#tracked.values()].filter((row) => row.alive).map((row) => row.identity);
    return [...roots, ...tracked];
  }

  #anyAlive(): boolean {
    return this.#roots.some((root) => this.#inspector.isAlive(root.identity)) || [...this.#tracked.values()].some((row) => this.#inspector.isAlive(row.identity));
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
