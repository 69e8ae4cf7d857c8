/**
 * The cells a runtime's sessions are contained in, and their record for the
 * next start: each terminal and process tree gets a cell of the chosen
 * containment under a key of its own, and the session journal learns what a
 * later start must end if this process dies without ending it (the cgroup,
 * the subreaper's members, or, without a containment, the top-level process).
 * @module
 */
import { NO_CONTAINMENT, type Containment, type ContainmentChoice, type ContainmentMode, type SessionCell } from './containment/index.ts';
import type { SessionRecorder } from './containment/journal.ts';
import { assertLimits, LIMIT_NAMES, limitsAsked, type CellGroup, type LimitSupport, type SessionLimits } from './containment/cgroup-limits.ts';
import { ProviderError } from './errors.ts';
import type { ProcessIdentity } from './inspect/inspector.ts';
import type { Platform } from './platform/platform.ts';

/** Names of cells: one sequence per process, since cgroups and the subreaper are per process. */
let lastSessionNumber = 0;

export interface SessionCellsOptions {
  readonly choice: ContainmentChoice | Containment | undefined;
  /** The platform whose rules apply; an injected one has none of this host's cgroups. */
  readonly platform: Platform;
  readonly journal: SessionRecorder | undefined;
  /** The identity of a live process, for the journal of an uncontained session. */
  identityOf(pid: number): ProcessIdentity | undefined;
}

export class SessionCells {
  readonly #options: SessionCellsOptions;
  #containment: Containment | undefined;
  /** Cells made here and not yet released, by key: the journal records only these. */
  readonly #keys = new Set<string>();
  #unwatchMembers: (() => void) | undefined;

  constructor(options: SessionCellsOptions) {
    this.#options = options;
    // An explicit choice that this host cannot give fails here, not at the first spawn.
    if (options.choice !== undefined && options.choice !== 'auto') this.#get();
  }

  /** How sessions are contained. */
  get mode(): ContainmentMode {
    return this.#get().mode;
  }

  /** Which limits sessions can be held to here, and why not the others. */
  limitSupport(): LimitSupport {
    const containment = this.#get();
    if (containment.limitSupport !== undefined) return containment.limitSupport();
    const reason = containment.mode === 'cgroup' ? 'no controllers' : `sessions are contained by ${containment.mode}, not a cgroup`;
    return { supported: [], unsupported: LIMIT_NAMES.map((name) => ({ name, reason })) };
  }

  /**
   * A new cell and its key, held to `limits`, and with the other sessions of
   * `group` to its total; undefined cell where nothing contains sessions.
   * @throws {ProviderError} INVALID_ARGUMENT for a limit out of range or one this host cannot enforce, naming it.
   */
  create(limits?: SessionLimits, group?: CellGroup): { key: string; cell: SessionCell | undefined } {
    assertLimits(limits);
    const asked = limitsAsked(limits);
    if (asked.length > 0 && this.#get().limitSupport === undefined) {
      const { unsupported } = this.limitSupport();
      throw new ProviderError('INVALID_ARGUMENT', `limits.${asked[0]}: this host cannot enforce it: ${unsupported[0]?.reason ?? 'no controller'}`);
    }
    lastSessionNumber += 1;
    const key = `s-${lastSessionNumber}`;
    const cell = this.#get().create(key, asked.length > 0 ? limits : undefined, group);
    this.#keys.add(key);
    return { key, cell };
  }

  /**
   * The cell `key` kept at `path` by this process's previous image (a
   * takeover); undefined where sessions have no cells.
   * @throws when cells of this containment cannot be adopted.
   */
  adopt(key: string, path: string | undefined): SessionCell | undefined {
    const number = /^s-(\d+)$/.exec(key)?.[1];
    // New keys follow the adopted ones: the journal names a session by its key.
    if (number !== undefined) lastSessionNumber = Math.max(lastSessionNumber, Number(number));
    this.#keys.add(key);
    const containment = this.#get();
    if (path === undefined) {
      if (containment.mode !== 'none') throw new Error(`session ${key} has no cell to adopt under ${containment.mode} containment`);
      return undefined;
    }
    if (containment.adopt === undefined) throw new Error(`cells of ${containment.mode} containment cannot be adopted`);
    return containment.adopt(key, path);
  }

  /**
   * Without a containment the journal records the top-level process itself:
   * a later start ends it, its tree and what it leads, if it still runs.
   */
  recordRoot(key: string, pid: number): void {
    const journal = this.#options.journal;
    if (journal === undefined || pid <= 0 || this.#get().mode !== 'none') return;
    const identity = this.#options.identityOf(pid);
    if (identity !== undefined) journal.record(key, [identity]);
  }

  /** Nothing of the session under `key` runs: there is nothing to record for a later start. */
  released(key: string): void {
    this.#options.journal?.record(key, undefined);
    this.#keys.delete(key);
  }

  /** Stops following the containment's members. */
  close(): void {
    this.#unwatchMembers?.();
    this.#unwatchMembers = undefined;
  }

  /** The containment, chosen on first use; the journal learns where sessions are kept. */
  #get(): Containment {
    if (this.#containment !== undefined) return this.#containment;
    const { choice = 'auto', platform, journal } = this.#options;
    let containment: Containment;
    if (typeof choice === 'object') containment = choice;
    // An injected platform has only its own rules: this host's cgroups are not its.
    else if (!platform.host && (choice === 'auto' || choice === 'none')) containment = NO_CONTAINMENT;
    else containment = platform.selectContainment(choice).containment;
    this.#containment = containment;
    const recovery = containment.recovery;
    if (journal !== undefined && recovery?.cgroup !== undefined) journal.setCgroup(recovery.cgroup);
    if (journal !== undefined && recovery?.watchMembers !== undefined) {
      this.#unwatchMembers = recovery.watchMembers((key, members) => {
        if (this.#keys.has(key)) journal.record(key, members);
      });
    }
    return containment;
  }
}
