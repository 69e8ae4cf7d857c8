/**
 * One session of the subreaper containment: what it was seen to start,
 * tracked by identity, and how it is emptied. The containment
 * (`subreaper.ts`) scans the process table and updates every cell.
 * @module
 */
import type { ProcessIdentity, ProcessIndex, ProcessInspector, ProcessRow } from '../inspect/inspector.ts';
import type { SessionCell } from './containment.ts';

/** SIGKILL rounds of a cell kill, against members forked while earlier ones died. */
const KILL_ROUNDS = 4;

export const identityKey = (identity: ProcessIdentity): string => `${identity.pid}:${identity.started}`;

/** Whether a stdio target belongs to one session alone: its pipes, sockets and terminal, not /dev/null or a file. */
export const sessionOwned = (target: string): boolean => /^(pipe|socket):\[\d+\]$/.test(target) || /^\/dev\/pts\/\d+$/.test(target);

/** What a cell asks of its containment. */
export interface CellHost {
  /** The stdio targets of a process (`/proc/<pid>/fd/0..2`). */
  stdioOf(pid: number): string[];
  /** A top-level process of `cell`, reported at once for the journal. */
  addRoot(cell: SubreaperCell, identity: ProcessIdentity): void;
  /** The cell is removed: it is no longer scanned. */
  release(cell: SubreaperCell): void;
  /** Scans unless a scan ran very recently. */
  scanIfStale(): void;
  scan(): void;
}

export class SubreaperCell implements SessionCell {
  readonly key: string;
  readonly complete = false;
  readonly #containment: CellHost;
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

  constructor(containment: CellHost, key: string, inspector: ProcessInspector) {
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
    return (
      this.#roots.some((root) => this.#inspector.isAlive(root.identity)) || [...this.#tracked.values()].some((row) => this.#inspector.isAlive(row.identity))
    );
  }
}
