/**
 * Containment: everything a session starts belongs to it until it is gone,
 * including processes that leave its process group or POSIX session (setsid,
 * job control) and are reparented away from its tree.
 *
 * One strategy is chosen per runtime:
 * - `cgroup` (Linux, a writable cgroup v2 hierarchy): each session gets a
 *   cgroup its children are born into; the kernel keeps every descendant in
 *   it, tells exactly when it is empty, and kills it whole (`cgroup.kill`).
 * - `subreaper` (Linux, where no cgroup can be made): the host process is a
 *   child subreaper, so orphaned descendants are reparented to it and stay
 *   findable; each session tracks the identities of what it was seen to start.
 * - `job` (Windows): each session's processes are in a Job Object of their
 *   own with kill-on-close; it is ended whole (`TerminateJobObject`), and
 *   closed with the daemon.
 * - `none`: no containment beyond the process group / session rules of the
 *   handles themselves.
 * @module
 */
import type { ProcessIdentity } from '../inspect/inspector.ts';
import type { CellGroup, LimitSupport, SessionAccounting, SessionLimits, SessionUsage, UsageMeter } from './cgroup-limits.ts';

export type { CellGroup, LimitName, LimitSupport, SessionAccounting, SessionLimits, SessionUsage, UsageMeter } from './cgroup-limits.ts';

export type ContainmentMode = 'cgroup' | 'subreaper' | 'job' | 'none';

/** Told a cell's live members, or undefined once the cell is removed. */
export type MembersListener = (key: string, members: readonly ProcessIdentity[] | undefined) => void;

/**
 * How a containment's sessions are journaled for, and recovered by, a later
 * start of the daemon if this one dies without ending them (`journal.ts`).
 * A containment without one leaves the journal the sessions' top-level
 * processes (a job needs nothing: it ends with the daemon that holds it).
 */
export interface ContainmentRecovery {
  /** This daemon's cgroup of session cgroups: the journal records it, and a later start kills and removes it whole. */
  readonly cgroup?: string;
  /** The cgroup this daemon's is made in, beside those of daemons that died: where a recovery may act. */
  readonly cgroupParent?: string;
  /** Follows each session's members as the containment tracks them, for the journal; answers the function that stops it. */
  watchMembers?(listener: MembersListener): () => void;
  /** Ends and removes what daemons that died left beside this one; answers what it removed. */
  sweepStale?(): Promise<string[]>;
}

/** One session's container: a cgroup, or the set of processes tracked for it. */
export interface SessionCell {
  /** The name the session was created with. */
  readonly key: string;
  /**
   * Runs `spawn`, which must start the session's top-level process
   * synchronously, so that the process is born inside the cell.
   */
  spawnInside<T>(spawn: () => T, threads?: number): T;
  /**
   * Records the session's top-level process once it was spawned; `stdio`
   * names what its fds 0-2 are when the caller knows better than /proc
   * can tell yet (a terminal's device).
   */
  attach(pid: number, stdio?: readonly string[]): void;
  /** True once nothing of the session runs any more (zombies do not count). */
  isEmpty(): boolean;
  /** The pids of the session's live processes, at this moment. */
  pids(): number[];
  /**
   * True when {@link pids} names every process of the session, kept there by
   * the kernel (a cgroup: a descendant cannot leave it without write access
   * to another cgroup): the session's processes are then read from the cell
   * alone, at a cost that does not grow with the other sessions. False where
   * the cell is a set of tracked processes (the subreaper) or the platform
   * reads its whole process table in one call anyway (a Job Object).
   */
  readonly complete: boolean;
  /** What the session used so far (its last counters once removed); undefined where the cell keeps none. */
  usage?(): SessionUsage | undefined;
  /** The session's counters for the daemon's metrics; undefined where the cell keeps none. */
  accounting?(): SessionAccounting | undefined;
  /**
   * Whether the cell's group holds its whole pids total at this moment, so
   * that no session of it can fork; false where the cell is in no group whose
   * pids are held.
   */
  groupFull?(): boolean;
  /** Starts measuring one run of the session (a persistent shell's command); undefined where the cell keeps no counters. */
  usageMeter?(): UsageMeter | undefined;
  /** SIGKILLs everything in the cell (`cgroup.kill`), escapees included. Synchronous. */
  kill(): void;
  /** Releases the cell once it is empty and nothing will be spawned into it. Idempotent. */
  remove(): void;
  /** Where the cell is kept (a cgroup's directory), for the next image of the daemon to adopt after a takeover. */
  readonly path?: string;
}

export interface Containment {
  readonly mode: ContainmentMode;
  /**
   * A new cell, or undefined in mode `none`, its processes held to `limits`,
   * and with the other sessions of `group` to the group's total of pids where
   * a pids controller can hold them (elsewhere the group changes nothing).
   * @throws {ProviderError} INVALID_ARGUMENT naming a limit it cannot enforce.
   */
  create(sessionKey: string, limits?: SessionLimits, group?: CellGroup): SessionCell | undefined;
  /** Which limits its cells enforce; none where absent. */
  limitSupport?(): LimitSupport;
  /**
   * The cell at `path` that this process made in its previous image (a
   * takeover), kept with everything in it; absent where cells cannot be adopted.
   */
  adopt?(sessionKey: string, path: string): SessionCell;
  /**
   * Tells the containment that the child `pid` was just started by the daemon
   * for itself (a worker, the session watcher): none of the sessions', so never
   * taken for one's orphan. Only the subreaper needs telling.
   */
  helperStarted?(pid: number): void;
  /** How its sessions are journaled and recovered, beyond their top-level processes. */
  readonly recovery?: ContainmentRecovery;
}

/** The containment of mode `none`: no cells. */
export const NO_CONTAINMENT: Containment = Object.freeze({
  mode: 'none' as const,
  create: () => undefined,
});
