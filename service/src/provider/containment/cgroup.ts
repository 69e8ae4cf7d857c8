/**
 * Containment in cgroup v2 (Linux): a cgroup per session, under a cgroup of
 * this process's own, `<own cgroup>/execworld-<pid>/<session key>`.
 *
 * A child is born into its session's cgroup without a race: a spawn is
 * synchronous on the JS thread (child_process.spawn and node-pty's fork both
 * fork before they return), so this process moves itself into the session's
 * cgroup, spawns, and moves back in a `finally`. Nothing else on this thread
 * can fork in between, and the kernel keeps every descendant in the cgroup
 * whatever it does to its process group or session. (The move takes the
 * process's other threads along for that moment: a worker thread of a host
 * that starts children itself could start one into the session's cgroup. The
 * daemon has none; a library host with such workers should know.)
 *
 * Controllers are enabled only in cgroups that never hold a process (the
 * daemon's cgroup of session cgroups and a group's, see cgroup-limits.ts), so
 * the rule that a cgroup with controllers has no processes of its own never
 * bites; resource limits of the cgroups above still do.
 *
 * A session of a group (the daemon's owner) is made in the group's cgroup,
 * `<own cgroup>/execworld-<pid>/<group>/<session key>`, where a pids
 * controller can hold the group's sessions to a total together; the group's
 * cgroup is made with its first session and removed with its last. Where no
 * pids controller follows the sessions a group changes nothing: the session's
 * cgroup is made directly in the daemon's, as one without a group.
 * @module
 */
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, rmdirSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { HOST_PLATFORM, hostFacts } from '../platform/host.ts';
import {
  cgroupEmpty,
  cgroupPids,
  CgroupUnavailableError,
  childCgroups,
  errnoCode,
  killAndRemoveCgroup,
  killCgroup,
  locateOwnCgroup,
  processRuns,
  removeCgroup,
} from './cgroup-fs.ts';
import {
  CgroupControllers,
  isGroupKey,
  LIMIT_NAMES,
  limitsAsked,
  type CellControls,
  type CellGroup,
  type LimitSupport,
  type SessionLimits,
  type SessionAccounting,
  type SessionUsage,
  type UsageMeter,
} from './cgroup-limits.ts';
import type { Containment, ContainmentRecovery, SessionCell } from './containment.ts';
import { ProviderError } from '../errors.ts';

export { CgroupUnavailableError } from './cgroup-fs.ts';

export interface CgroupContainmentOptions {
  /** Test hook: the directory of the cgroup this process is in. @default found from /proc/self */
  readonly ownDirectory?: string;
  /** Name of this process's cgroup under its own. @default `execworld-<pid>` */
  readonly name?: string;
  /** Test hook: whether the controllers (limits, v1 hierarchies) are looked for. @default true */
  readonly controllers?: boolean;
}

/** The name of the cgroup of session cgroups of the process `pid`: `execworld-<pid>`, beside that process. */
export function daemonCgroupName(pid: number): string {
  return `execworld-${pid}`;
}

/** The pid a cgroup named `name` was made for, when it is named as {@link daemonCgroupName} names them. */
export function daemonCgroupPid(name: string): number | undefined {
  const pid = /^execworld-(\d+)$/.exec(name)?.[1];
  return pid === undefined ? undefined : Number(pid);
}
/** The support of a containment that looks for no controllers (a test's, on a directory of its own). */
const NO_CONTROLLERS: LimitSupport = Object.freeze({
  supported: [],
  unsupported: LIMIT_NAMES.map((name) => ({ name, reason: 'this containment looks for no controllers' })),
});

/** How long a start waits for a dead daemon's cgroup to empty after cgroup.kill. */
const STALE_KILL_TIMEOUT_MS = 10_000;

/**
 * The cgroup containment of this process. Create it once per process (see
 * {@link hostCgroupContainment}): its cgroup is named after the process.
 */
export class CgroupContainment implements Containment {
  readonly mode = 'cgroup' as const;
  /** The cgroup this process lives in, and returns to after each spawn. */
  readonly origin: string;
  /** This process's cgroup of session cgroups. */
  readonly directory: string;
  /** The journal records the cgroup of session cgroups, which a later start kills whole; the stale ones beside it are swept. */
  readonly recovery: ContainmentRecovery;
  readonly #originProcs: number;
  readonly #pid: string;
  readonly #cells = new Set<CgroupCell>();
  /** The cell this process could not leave after a spawn; it is never cgroup.kill-ed. */
  #stuckIn: CgroupCell | undefined;
  /** The controllers that limit and account for sessions (see cgroup-limits.ts); made on first use. */
  #controllers: CgroupControllers | undefined;
  readonly #useControllers: boolean;

  /** @throws {CgroupUnavailableError} when no cgroup can be made and entered here. */
  constructor(options: CgroupContainmentOptions = {}) {
    if (!hostFacts.linuxCalls) throw new CgroupUnavailableError(`cgroups are Linux only, not ${HOST_PLATFORM}`);
    this.#pid = String(process.pid);
    this.#useControllers = options.controllers ?? options.ownDirectory === undefined;
    this.origin = options.ownDirectory ?? locateOwnCgroup();
    this.directory = join(this.origin, options.name ?? daemonCgroupName(process.pid));
    this.recovery = { cgroup: this.directory, cgroupParent: this.origin, sweepStale: () => this.sweepStale() };
    try {
      mkdirSync(this.directory, { mode: 0o755 });
    } catch (error) {
      if (errnoCode(error) !== 'EEXIST') throw new CgroupUnavailableError(`cannot create ${this.directory}: ${(error as Error).message}`, { cause: error });
      // Made by this process's previous image (a takeover, an exec in place): its cells are adopted, not killed.
      if (!takingOver) {
        // Left by an earlier process with this pid: what it left runs no more from now on. Only
        // the cgroups it left are removed, once empty; new cells are made beside them.
        const left = childCgroups(this.directory);
        killCgroup(this.directory);
        void Promise.all(left.map((dir) => killAndRemoveCgroup(dir, STALE_KILL_TIMEOUT_MS))).catch(() => undefined);
      }
    }
    try {
      if (!existsSync(join(this.directory, 'cgroup.kill'))) throw new CgroupUnavailableError('cgroup.kill is missing (Linux 5.14 or later is needed)');
      this.#originProcs = openSync(join(this.origin, 'cgroup.procs'), 'w');
    } catch (error) {
      removeCgroup(this.directory);
      throw error instanceof CgroupUnavailableError
        ? error
        : new CgroupUnavailableError(`cannot open ${this.origin}/cgroup.procs: ${(error as Error).message}`, { cause: error });
    }
    // Whether this process may move itself at all: into its cgroup and straight back.
    try {
      writeFileSync(join(this.directory, 'cgroup.procs'), this.#pid);
    } catch (error) {
      closeSync(this.#originProcs);
      removeCgroup(this.directory);
      throw new CgroupUnavailableError(`cannot move this process between cgroups: ${(error as Error).message}`, { cause: error });
    }
    this.#leave();
    process.once('exit', () => this.#removeEmpty());
  }

  /** The controllers of this process's cgroups, found on first use. */
  #getControllers(): CgroupControllers | undefined {
    if (!this.#useControllers) return undefined;
    this.#controllers ??= new CgroupControllers(this.directory, basename(this.directory), {
      stale: (name) => {
        const pid = daemonCgroupPid(name);
        return pid !== undefined && pid !== process.pid && !processRuns(pid);
      },
    });
    return this.#controllers;
  }

  limitSupport(): LimitSupport {
    return this.#getControllers()?.support() ?? NO_CONTROLLERS;
  }

  create(sessionKey: string, limits?: SessionLimits, group?: CellGroup): CgroupCell {
    if (!/^[\w.-]+$/.test(sessionKey)) throw new Error(`session key ${JSON.stringify(sessionKey)} is not a cgroup name`);
    if (group !== undefined && !isGroupKey(group.key)) throw new Error(`group key ${JSON.stringify(group.key)} is not a cgroup name`);
    const controllers = this.#getControllers();
    const asked = limitsAsked(limits);
    if (controllers === undefined && asked.length > 0) {
      throw new ProviderError('INVALID_ARGUMENT', `limits.${asked[0]}: this containment looks for no controllers`);
    }
    // A group only where a pids controller holds it to its total.
    const held = group !== undefined && controllers?.groupsHeld === true ? group : undefined;
    const parent = held === undefined ? this.directory : join(this.directory, held.key);
    let total: number | undefined;
    if (held !== undefined) {
      try {
        mkdirSync(parent, { mode: 0o755 });
      } catch (error) {
        // The group's cgroup of its other sessions (or of this process's previous image, a takeover): shared.
        if (errnoCode(error) !== 'EEXIST') throw error;
      }
      try {
        total = controllers!.group(parent, held);
      } catch (error) {
        removeEmptyGroup(parent);
        throw error;
      }
    }
    let path = join(parent, sessionKey);
    for (let attempt = 1; ; attempt += 1) {
      try {
        mkdirSync(path, { mode: 0o755 });
        break;
      } catch (error) {
        // A cgroup of that name left by an earlier process with this pid is not reused.
        if (errnoCode(error) !== 'EEXIST' || attempt >= 100) {
          if (held !== undefined) removeEmptyGroup(parent);
          throw error;
        }
        path = join(parent, `${sessionKey}.${attempt}`);
      }
    }
    let procs: number;
    let controls: CellControls | undefined;
    try {
      procs = openSync(join(path, 'cgroup.procs'), 'w');
    } catch (error) {
      removeCgroup(path);
      if (held !== undefined) removeEmptyGroup(parent);
      throw error;
    }
    try {
      controls = controllers?.cell(basename(path), path, limits, held === undefined ? undefined : { key: held.key, total: total! });
    } catch (error) {
      closeSync(procs);
      removeCgroup(path);
      if (held !== undefined) removeEmptyGroup(parent);
      throw error;
    }
    const cell = new CgroupCell(this, sessionKey, path, procs, controls);
    this.#cells.add(cell);
    return cell;
  }

  /**
   * The cell at `path`, a cgroup this process made in its previous image
   * (before a takeover's exec), with everything still in it. Its limits stay
   * in its files; the counters of the controls are not kept: its usage is not
   * told from then on. Its v1 cgroups (and its group's, once empty) are
   * removed with it.
   */
  adopt(sessionKey: string, path: string): CgroupCell {
    const parent = dirname(path);
    const inGroup = dirname(parent) === this.directory && isGroupKey(basename(parent));
    if (parent !== this.directory && !inGroup) throw new Error(`${path} is not a session cgroup of this process`);
    const v1 = this.#getControllers()?.adoptedV1(basename(path), inGroup ? basename(parent) : undefined) ?? [];
    const cell = new CgroupCell(this, sessionKey, path, openSync(join(path, 'cgroup.procs'), 'w'), undefined, v1);
    this.#cells.add(cell);
    return cell;
  }

  /**
   * The cgroups of processes that died without cleaning up (SIGKILL, a crash):
   * every `execworld-<pid>` beside this process's own whose pid runs no more
   * is killed, waited for until empty, and removed. Returns those removed.
   */
  async sweepStale(runs: (pid: number) => boolean = processRuns): Promise<string[]> {
    let names: string[];
    try {
      names = readdirSync(this.origin);
    } catch (_error) {
      return [];
    }
    const stale = names.filter((name) => {
      const pid = daemonCgroupPid(name);
      return pid !== undefined && pid !== process.pid && !runs(pid);
    });
    const results = await Promise.all(
      stale.map(async (name) => ((await killAndRemoveCgroup(join(this.origin, name), STALE_KILL_TIMEOUT_MS)) ? [join(this.origin, name)] : [])),
    );
    return results.flat();
  }

  /** Moves this process into `cell`, runs `spawn`, and moves it back whatever happens. */
  spawnInside<T>(cell: CgroupCell, procs: number, spawn: () => T, controls?: CellControls, threads = 0): T {
    if (this.#stuckIn !== undefined) this.#leave();
    writeSync(procs, this.#pid);
    try {
      // The v1 cgroups too, where limits or accounting need them: the child is born in all of them.
      return controls === undefined ? spawn() : controls.inside(spawn, threads);
    } finally {
      this.#leave(cell);
    }
  }

  /** True while this process is (or may be) inside `cell`: then it must never be killed whole. */
  holdsHost(cell: CgroupCell): boolean {
    return this.#stuckIn === cell;
  }

  forget(cell: CgroupCell): void {
    this.#cells.delete(cell);
  }

  #leave(from?: CgroupCell): void {
    try {
      writeSync(this.#originProcs, this.#pid);
      this.#stuckIn = undefined;
      return;
    } catch (_error) {
      // Once more through a fresh descriptor, below.
    }
    try {
      writeFileSync(join(this.origin, 'cgroup.procs'), this.#pid);
      this.#stuckIn = undefined;
    } catch (_error) {
      // The spawn happened: it is not undone. The cell is only never killed whole while this process is in it.
      this.#stuckIn = from;
    }
  }

  #removeEmpty(): void {
    for (const cell of this.#cells) if (cell.isEmpty()) cell.remove();
    if (this.#cells.size === 0) removeCgroup(this.directory);
    try {
      closeSync(this.#originProcs);
    } catch (_error) {
      // Already closed.
    }
  }
}

class CgroupCell implements SessionCell {
  readonly key: string;
  readonly complete = true;
  /** The cgroup's directory. */
  readonly path: string;
  readonly #containment: CgroupContainment;
  readonly #controls: CellControls | undefined;
  #procs: number | undefined;
  #removed = false;

  /** The cell is in a group's cgroup. */
  readonly #inGroup: boolean;
  /** An adopted cell's v1 cgroups, deepest first, removed with it (a made cell's are its controls'). */
  readonly #v1: readonly string[];

  constructor(containment: CgroupContainment, key: string, path: string, procs: number, controls?: CellControls, v1: readonly string[] = []) {
    this.#containment = containment;
    this.key = key;
    this.path = path;
    this.#v1 = v1;
    this.#inGroup = dirname(path) !== containment.directory;
    this.#procs = procs;
    this.#controls = controls;
  }

  spawnInside<T>(spawn: () => T, threads = 0): T {
    if (this.#procs === undefined) throw new Error(`cgroup ${this.path} was removed`);
    return this.#containment.spawnInside(this, this.#procs, spawn, this.#controls, threads);
  }

  usage(): SessionUsage | undefined {
    return this.#controls?.usage();
  }

  groupFull(): boolean {
    return this.#controls?.groupFull() ?? false;
  }

  usageMeter(): UsageMeter | undefined {
    return this.#controls?.meter();
  }

  accounting(): SessionAccounting | undefined {
    return this.#controls?.accounting();
  }

  attach(_pid: number, _stdio?: readonly string[]): void {
    // The cgroup holds the process and everything it starts.
  }

  isEmpty(): boolean {
    return this.#removed || cgroupEmpty(this.path);
  }

  pids(): number[] {
    if (this.#removed) return [];
    const self = process.pid;
    return cgroupPids(this.path).filter((pid) => pid !== self);
  }

  kill(): void {
    if (this.#removed) return;
    if (this.#containment.holdsHost(this)) {
      // This process may be inside: each other member instead of the whole cgroup.
      for (const pid of this.pids()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch (_error) {
          // Gone.
        }
      }
      return;
    }
    killCgroup(this.path);
  }

  remove(): void {
    if (this.#removed) return;
    // The controls keep their last counters: the v2 cgroup's cpu.stat goes with it.
    if (this.#controls !== undefined && !this.#controls.remove()) return;
    if (!removeCgroup(this.path)) return;
    // An adopted cell's v1 cgroups: the kernel refuses one still in use, left for the next start.
    for (const directory of this.#v1) removeEmptyGroup(directory);
    this.#removed = true;
    // The group's cgroup goes with its last session's: the kernel refuses while another is in it.
    if (this.#inGroup) removeEmptyGroup(dirname(this.path));
    if (this.#procs !== undefined) closeSync(this.#procs);
    this.#procs = undefined;
    this.#containment.forget(this);
  }
}

/** Removes a cgroup (a group's, once no session's is in it); one still in use stays. */
function removeEmptyGroup(directory: string): void {
  try {
    rmdirSync(directory);
  } catch (_error) {
    // Another session's cgroup is in it (EBUSY, ENOTEMPTY), or it is gone.
  }
}

/** Set before the containment is made by a process that took over from its previous image. */
let takingOver = false;

/**
 * Tells the cgroup containment, before it is made, that this process is the
 * new image of a daemon that exec'd in place: the cgroup named after its pid
 * holds the sessions it adopts, and is not killed as an earlier process's.
 */
export function adoptPreviousImageCgroups(): void {
  takingOver = true;
}

let host: { containment: CgroupContainment } | { error: Error } | undefined;

/**
 * This process's cgroup containment, made on first use; the same one for
 * every runtime of the process.
 * @throws {CgroupUnavailableError} with the reason, every time, when none can be made.
 */
export function hostCgroupContainment(): CgroupContainment {
  host ??= (() => {
    try {
      const containment = new CgroupContainment();
      // Processes of earlier runs that were killed (a test worker, a crashed host) leave
      // their cgroups behind; whoever comes next ends and removes them.
      void containment.sweepStale().catch(() => undefined);
      return { containment };
    } catch (error) {
      return { error: error as Error };
    }
  })();
  if ('error' in host) throw host.error;
  return host.containment;
}
