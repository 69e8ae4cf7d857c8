/**
 * The platform process inspector: everything the local provider needs to know
 * about the host's process table, behind one interface with one implementation
 * per platform (`linux.ts`, `darwin.ts`, `win32.ts`), chosen once in `index.ts`.
 *
 * Every method is synchronous and fails closed: a read that fails is no
 * evidence, not waiting, not alive.
 * @module
 */
import type { SessionCell } from '../containment/containment.ts';
import { ProviderError } from '../errors.ts';

/**
 * A process named by pid and start time, so that a recycled pid is never
 * mistaken for the process it once named.
 */
export interface ProcessIdentity {
  readonly pid: number;
  /** Opaque start-time text, compared exactly. */
  readonly started: string;
}

/** One row of the process table. */
export interface ProcessRow {
  readonly identity: ProcessIdentity;
  /** The command name, when the platform reports it. */
  readonly name?: string | undefined;
  readonly ppid: number;
  /** Process group, when the platform reports it. */
  readonly pgrp: number | undefined;
  /** Session id, when the platform reports it. */
  readonly session: number | undefined;
  /** False for a zombie or a dead entry. */
  readonly alive: boolean;
  /** Start time in clock ticks since boot, when the platform reports it so. */
  readonly startTicks: number | undefined;
  /** Device number of the controlling terminal, when it has one and the platform reports it. */
  readonly terminal?: number | undefined;
}

/** Evidence that a foreground group is blocked reading its terminal. */
export interface InputWait {
  /**
   * Names this particular wait: it stays the same while the waiting threads stay
   * blocked and changes once any of them wakes and blocks again, so a wait that
   * existed before an input write is told apart from a new one.
   */
  readonly token: string;
  /** The processes whose threads were proven blocked, in table order. */
  readonly readers: readonly number[];
  /**
   * The command name of the first reader, read once its wait was proven: a
   * process table read before may still name the shell that forked it, as
   * it was before its exec.
   */
  readonly command?: string | undefined;
}

/** The terminal a foreground group belongs to, used to tell terminal reads from other reads. */
export interface TerminalDevice {
  /** Path of the terminal's slave side, e.g. `/dev/pts/3`. */
  readonly path: string;
  /** Its device number, when known. */
  readonly rdev?: number;
}

export interface ProcessInspector {
  /** The platform this inspector reads. */
  readonly platform: NodeJS.Platform;
  /** Whether {@link inputWait} can ever prove a wait on this host. */
  readonly exactInputWait: boolean;
  /** The foreground process group of the terminal `shellPid` controls, if any. */
  foregroundGroup(shellPid: number): number | undefined;
  /**
   * Proof that some thread of group `pgid` is blocked reading terminal input, or
   * undefined. `rows`, a snapshot taken just before, spares a second table scan.
   */
  inputWait(pgid: number, terminal: TerminalDevice | undefined, rows?: readonly ProcessRow[]): InputWait | undefined;
  /** Names a terminal device once, so repeated proofs need not look it up. */
  terminalDevice(path: string): TerminalDevice;
  /** The identity of `pid` now, if it is alive. */
  identity(pid: number): ProcessIdentity | undefined;
  /** One reading of the whole process table. */
  snapshot(): ProcessRow[];
  /**
   * The rows of the processes `pids` alone (those alive or zombies; a pid
   * gone meanwhile has none): what a complete containment cell holds, read
   * at a cost that does not grow with the rest of the table.
   */
  snapshotOf(pids: readonly number[]): ProcessRow[];
  /** Now, in the unit of {@link ProcessRow.startTicks}; undefined where start times are not ticks. */
  nowTicks(): number | undefined;
  /** True when the process named by `identity` still runs (not a zombie). */
  isAlive(identity: ProcessIdentity): boolean;
  /**
   * Whether group `pgid` has a member that is not a zombie: true, false when it
   * has only zombies, undefined when that cannot be told (no members found, or
   * the table is unreadable).
   */
  groupHasLiveMembers(pgid: number): boolean | undefined;
  /** Sends `signal` to group `pgid`; throws what `kill(2)` reports. */
  signalGroup(pgid: number, signal: NodeJS.Signals): void;
  /** Sends `signal` to the process only while `identity` is alive; true when it was sent. */
  signalProcess(identity: ProcessIdentity, signal: NodeJS.Signals): boolean;
}

/** Thrown by an inspector method the platform cannot serve: the provider's UNSUPPORTED. */
export class InspectionUnsupportedError extends ProviderError {
  constructor(message: string) {
    super('UNSUPPORTED', message);
    this.name = 'InspectionUnsupportedError';
  }
}

/** A process-table snapshot indexed by pid and by parent. */
export class ProcessIndex {
  readonly rows: readonly ProcessRow[];
  readonly #byPid = new Map<number, ProcessRow>();
  readonly #children = new Map<number, ProcessRow[]>();

  constructor(rows: readonly ProcessRow[]) {
    this.rows = rows;
    for (const row of rows) {
      this.#byPid.set(row.identity.pid, row);
      const list = this.#children.get(row.ppid);
      if (list === undefined) this.#children.set(row.ppid, [row]);
      else list.push(row);
    }
  }

  get(pid: number): ProcessRow | undefined {
    return this.#byPid.get(pid);
  }

  /** True when `identity` names a row of this snapshot, zombie or not. */
  has(identity: ProcessIdentity): boolean {
    return this.#byPid.get(identity.pid)?.identity.started === identity.started;
  }

  /**
   * `root` and its descendants, children before their parents and the root
   * last; empty when `root` is not in the snapshot. Safe against parent cycles,
   * and iterative, so a deep chain cannot overflow the stack.
   */
  tree(root: ProcessIdentity): ProcessRow[] {
    const rootRow = this.#byPid.get(root.pid);
    if (rootRow?.identity.started !== root.started) return [];
    const order: ProcessRow[] = [];
    const visited = new Set<number>([root.pid]);
    const stack: { row: ProcessRow; expanded: boolean }[] = [{ row: rootRow, expanded: false }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.expanded) {
        stack.pop();
        order.push(top.row);
        continue;
      }
      top.expanded = true;
      for (const child of this.#children.get(top.row.identity.pid) ?? []) {
        if (visited.has(child.identity.pid)) continue;
        visited.add(child.identity.pid);
        stack.push({ row: child, expanded: false });
      }
    }
    return order;
  }
}

/**
 * The rows a session's processes are found in: a complete cell's alone (a
 * cgroup), so reading one session costs the same however many other sessions
 * the host runs; otherwise, with no cell or one that may miss processes, the
 * whole process table.
 */
export function sessionRows(inspector: ProcessInspector, cell: Pick<SessionCell, 'complete' | 'pids'> | undefined): ProcessRow[] {
  return cell?.complete === true ? inspector.snapshotOf(cell.pids()) : inspector.snapshot();
}

/** `kill(pid, signal)` that reports failure as false instead of throwing. */
export function trySignal(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch (_error) {
    return false;
  }
}
