/**
 * Limits and accounting of a session's cgroup: memory, pids and cpu, with the
 * controllers this host lets the daemon use.
 *
 * On a pure cgroup v2 host (a Kubernetes node) the controllers are those the
 * parent of the daemon's cgroup of session cgroups hands down
 * (`cgroup.controllers`); the daemon enables them in its own cgroup of
 * session cgroups (`cgroup.subtree_control`: it never holds a process, so the
 * rule that a cgroup with controllers has no processes of its own holds) and
 * writes `memory.max`, `memory.swap.max`, `pids.max` and `cpu.max` in each
 * session's cgroup.
 *
 * On a hybrid host (cgroup v2 with no controllers for containment, the v1
 * `memory`, `pids`, `cpu` and `cpuacct` hierarchies beside it) a limited
 * session also gets a cgroup in each v1 hierarchy it needs, made beside the
 * v1 cgroup the daemon is in (`<own>/execworld-<pid>/<key>`). A child is born
 * into them as into its v2 cgroup: for the spawn, the daemon's main thread
 * (whose thread id is the process id) writes itself to each v1 cgroup's
 * `tasks` (v1 moves single threads, so only the forking thread is counted
 * there, never the daemon's other threads), forks, and writes itself back.
 * The child inherits the forking thread's cgroups, so it never runs outside
 * its limits. What the daemon's main thread allocates in that window is
 * charged to the session's memory cgroup (v1 charges by the address space's
 * owner, the main thread): the pages of one fork.
 *
 * Groups: the sessions of one group (the daemon's owner) are held together
 * to a total of pids, by the kernel. Their cells are made in a cgroup of the
 * group's (`<daemon's cgroup>/<group>/<session>`: in the v2 tree, whose
 * `pids.max` holds the total where v2 has the pids controller, and in the v1
 * pids hierarchy on a hybrid host), made when its first session is and
 * removed once its last session's cell is. The group's cgroup never holds a
 * process; on v2 it hands its controllers down (`cgroup.subtree_control`).
 * Without a total of its own a group gets {@link CgroupControllers.defaultGroupPids}.
 *
 * Usage: cpu from v2's `cpu.stat` (kept by every v2 cgroup, controller or
 * not) or v1's `cpuacct`; peak memory from `memory.peak` (v2, with the
 * memory controller) or `memory.max_usage_in_bytes` (v1), reset for each run
 * of a persistent shell where the kernel allows ({@link CellControls.meter});
 * which limit was hit from `memory.events` / `memory.oom_control` and
 * `memory.failcnt`, `pids.events`, and `cpu.stat`'s `nr_throttled`.
 *
 * The daemon keeps out of the OOM killer's way: it lowers its own
 * `oom_score_adj` ({@link DAEMON_OOM_SCORE_ADJ}, where it may: root), and a
 * session's processes are born with {@link SESSION_OOM_SCORE_ADJ}, which the
 * daemon takes for the instant of the fork (raising needs no privilege, and
 * returning to a value no lower than the one it last set as root is allowed):
 * under memory pressure of the whole host the kernel kills a session's
 * process before the daemon.
 * @module
 */
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readSync, rmdirSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import type { SessionLimits, SessionUsage, UsageMeter } from '@execworld/sdk/seam';
import { ProviderError } from '../errors.ts';
import { kernelTextOrUndefined } from '../kernel-text.ts';
import { descendantsOf, errnoCode, type MountInfoEntry } from './cgroup-fs.ts';
import { usageBetween, ZERO_COUNTERS, type UsageCounters } from './usage.ts';

export type { SessionLimits, SessionUsage, UsageMeter };

export type LimitName = 'memoryBytes' | 'pids' | 'cpu';
export const LIMIT_NAMES: readonly LimitName[] = ['memoryBytes', 'pids', 'cpu'];

/** A session's counters for the daemon's metrics: what it used so far, which limits it ran into, and its memory now. */
export interface SessionAccounting {
  readonly cpuUserMs: number;
  readonly cpuSystemMs: number;
  /** Memory in use now (v2 `memory.current`, v1 `memory.usage_in_bytes`); 0 once the session's cgroups are gone, null where no memory controller follows it. */
  readonly memoryBytes: number | null;
  /** Every limit the session ran into so far (not only the first, as `limitHit` says). */
  readonly limitsHit: readonly ('memory' | 'pids' | 'cpu')[];
  /** Processes of the session the kernel's OOM killer killed. */
  readonly oomKills: number;
}

/** Which limits this host's daemon can enforce, and why not the others. */
export interface LimitSupport {
  readonly supported: readonly LimitName[];
  readonly unsupported: readonly { readonly name: LimitName; readonly reason: string }[];
  /**
   * The most pids (processes and threads) all the sessions of one group (the
   * daemon's owner) hold together; absent where no pids controller holds them.
   */
  readonly groupPids?: number;
}

/**
 * The group a session's cell is made in: `key` names its cgroup (a cgroup
 * name, never a session key `s-…`), `pids` is the total all its sessions hold
 * together (the containment's default when absent).
 */
export interface CellGroup {
  readonly key: string;
  readonly pids?: number | undefined;
}

/** Whether `key` may name a group's cgroup: a plain cgroup name that no session key (`s-<n>`) can be. */
export function isGroupKey(key: string): boolean {
  return /^[\w-][\w.-]{0,99}$/.test(key) && !/^s-/.test(key);
}

/** The smallest memory limit taken: below it nothing starts. */
export const MIN_MEMORY_BYTES = 4 * 1024 * 1024;
/** Beyond any machine's memory (1 PiB): a larger limit is a mistake. */
export const MAX_MEMORY_BYTES = 2 ** 50;
/** Linux's largest pid_max. */
export const MAX_PIDS = 4_194_304;
/** cpu.max / cfs_quota_us take at least 1 ms per period: 0.01 of a core at the 100 ms period. */
export const MIN_CPU = 0.01;
export const MAX_CPU = 1024;
/** The daemon's own oom_score_adj: the OOM killer's last choice but for what is set lower still (-1000: never). */
export const DAEMON_OOM_SCORE_ADJ = -500;
/** A session's processes' oom_score_adj: the OOM killer's first choice. */
export const SESSION_OOM_SCORE_ADJ = 500;

/** The CFS period the quota is measured over, in microseconds (the kernel's default). */
const CPU_PERIOD_US = 100_000;

/**
 * Refuses limits that are not numbers in range, naming the field.
 * @throws {ProviderError} INVALID_ARGUMENT
 */
export function assertLimits(limits: SessionLimits | undefined, field = 'limits'): void {
  if (limits === undefined) return;
  if (typeof limits !== 'object' || limits === null) throw new ProviderError('INVALID_ARGUMENT', `${field} must be an object`);
  const check = (name: LimitName, integer: boolean, min: number, max: number): void => {
    const value = limits[name];
    if (value === undefined) return;
    if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value)) || value < min || value > max) {
      throw new ProviderError(
        'INVALID_ARGUMENT',
        `${field}.${name} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, not ${String(value)}`,
      );
    }
  };
  check('memoryBytes', true, MIN_MEMORY_BYTES, MAX_MEMORY_BYTES);
  check('pids', true, 1, MAX_PIDS);
  check('cpu', false, MIN_CPU, MAX_CPU);
}

/** The names of the limits `limits` sets. */
export function limitsAsked(limits: SessionLimits | undefined): LimitName[] {
  return limits === undefined ? [] : LIMIT_NAMES.filter((name) => limits[name] !== undefined);
}

type V1Controller = 'memory' | 'pids' | 'cpu' | 'cpuacct';
const V1_CONTROLLERS: readonly V1Controller[] = ['memory', 'pids', 'cpu', 'cpuacct'];

/** The v1 hierarchy of a controller: where this process's cgroup of it is on disk. */
interface V1Hierarchy {
  readonly controller: V1Controller;
  /** The directory of the cgroup this process is in. */
  readonly origin: string;
}

/**
 * The v1 hierarchies of this process's controllers: each writable `cgroup`
 * mount that carries one of them, and this process's cgroup in it from
 * `/proc/self/cgroup` (`<id>:<controllers>:<path>`).
 */
export function v1Hierarchies(mounts: readonly MountInfoEntry[], procCgroup: string, superOptions: ReadonlyMap<string, string>): V1Hierarchy[] {
  const found: V1Hierarchy[] = [];
  const own = new Map<string, string>();
  for (const line of procCgroup.split('\n')) {
    const match = /^\d+:([^:]+):(\/.*)$/.exec(line);
    if (match === null) continue;
    for (const controller of match[1]!.split(',')) own.set(controller, match[2]!);
  }
  for (const controller of V1_CONTROLLERS) {
    const path = own.get(controller);
    if (path === undefined || path.split('/').includes('..')) continue;
    for (const mount of mounts) {
      if (mount.fsType !== 'cgroup' || mount.readOnly) continue;
      if (!(superOptions.get(mount.mountPoint) ?? '').split(',').includes(controller)) continue;
      const root = mount.root === '/' ? '' : mount.root.replace(/\/$/, '');
      if (root !== '' && path !== root && !path.startsWith(`${root}/`)) continue;
      const rest = path.slice(root.length);
      found.push({ controller, origin: rest === '' || rest === '/' ? mount.mountPoint : join(mount.mountPoint, rest) });
      break;
    }
  }
  return found;
}

/** The super options of each mount point of /proc/self/mountinfo (which controllers a v1 mount carries). */
export function mountSuperOptions(mountinfo: string): Map<string, string> {
  const options = new Map<string, string>();
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ');
    const separator = fields.indexOf('-', 6);
    if (separator < 0 || fields[4] === undefined) continue;
    options.set(fields[4].replace(/\\040/g, ' '), fields[separator + 3] ?? '');
  }
  return options;
}

/** The line of each key {@link keyed} was asked for: the keys are the few names of the control files' fields. */
const KEYED_LINES = new Map<string, RegExp>();

/** What a `tasks` file takes for the thread that writes it. */
const CALLING_THREAD = '0';

/** The value of `key` in a flat-keyed file (`key value` lines), or undefined. */
export function keyed(text: string | undefined, key: string): number | undefined {
  if (text === undefined) return undefined;
  let line = KEYED_LINES.get(key);
  if (line === undefined) {
    line = new RegExp(`^${key} (\\d+)$`, 'm');
    KEYED_LINES.set(key, line);
  }
  const match = line.exec(text);
  return match === null ? undefined : Number(match[1]);
}

function readNumber(path: string): number | undefined {
  const text = kernelTextOrUndefined(path)?.trim();
  return text === undefined || !/^\d+$/.test(text) ? undefined : Number(text);
}

/** Writes `value` to a control file. @throws {ProviderError} naming the limit when the kernel refuses it. */
function writeControl(path: string, value: string, limit: LimitName): void {
  try {
    writeFileSync(path, value);
  } catch (error) {
    throw new ProviderError('INVALID_ARGUMENT', `limits.${limit}: the kernel refused ${value} for ${path}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * The controllers of one daemon's cgroups: those of its v2 cgroup of session
 * cgroups, and the v1 hierarchies beside. Made once with the cgroup
 * containment.
 */
export class CgroupControllers {
  /** v2 controllers enabled for the session cgroups. */
  readonly v2: ReadonlySet<string>;
  readonly #v1 = new Map<V1Controller, { origin: string; directory: string; back: number }>();
  readonly #v1Reasons = new Map<V1Controller, string>();
  /** /proc/self/oom_score_adj, open for writing; undefined where it cannot be written. */
  readonly #oomFd: number | undefined;
  /** The daemon's own oom_score_adj, returned to after each spawn. */
  readonly #ownOomScoreAdj: string;
  readonly #v2Directory: string;
  #defaultGroupPids: number | undefined;

  /**
   * @param v2Directory the daemon's v2 cgroup of session cgroups (holds no process).
   * @param name the name of the daemon's cgroup of session cgroups in each v1 hierarchy.
   * @param options.stale which names beside it are of daemons that died, to be removed.
   */
  constructor(v2Directory: string, name: string, options: { hierarchies?: readonly V1Hierarchy[]; stale?: (name: string) => boolean } = {}) {
    const { hierarchies } = options;
    this.#v2Directory = v2Directory;
    const v2 = new Set<string>();
    const available = (kernelTextOrUndefined(join(v2Directory, 'cgroup.controllers')) ?? '').trim().split(/\s+/);
    for (const controller of ['memory', 'pids', 'cpu']) {
      if (!available.includes(controller)) continue;
      try {
        writeFileSync(join(v2Directory, 'cgroup.subtree_control'), `+${controller}`);
        v2.add(controller);
      } catch (_error) {
        // Not this one: v1 or nothing.
      }
    }
    this.v2 = v2;
    let found: readonly V1Hierarchy[] = hierarchies ?? [];
    if (hierarchies === undefined) {
      const mountinfo = kernelTextOrUndefined('/proc/self/mountinfo');
      const procCgroup = kernelTextOrUndefined('/proc/self/cgroup');
      if (mountinfo !== undefined && procCgroup !== undefined) {
        found = v1Hierarchies(parseMounts(mountinfo), procCgroup, mountSuperOptions(mountinfo));
      }
    }
    for (const { controller, origin } of found) {
      if (controller === 'cpuacct' ? false : v2.has(controller)) continue;
      if (options.stale !== undefined) sweepStaleV1(origin, options.stale);
      // A spawn moves the main thread (its tid is the pid): from another thread the child would fork outside.
      if (!isMainThread) {
        this.#v1Reasons.set(controller, 'the v1 hierarchies are used from the main thread only');
        continue;
      }
      const directory = join(origin, name);
      try {
        mkdirSync(directory, { mode: 0o755 });
      } catch (error) {
        if (errnoCode(error) !== 'EEXIST') {
          this.#v1Reasons.set(controller, `cannot create ${directory}: ${(error as Error).message}`);
          continue;
        }
      }
      try {
        // memory: children charge hierarchically only with use_hierarchy (the default since 5.x; a no-op then).
        if (controller === 'memory' && readNumber(join(directory, 'memory.use_hierarchy')) === 0) writeFileSync(join(directory, 'memory.use_hierarchy'), '1');
        this.#v1.set(controller, { origin, directory, back: openSync(join(origin, 'tasks'), 'w') });
      } catch (error) {
        this.#v1Reasons.set(controller, `cannot use ${origin}: ${(error as Error).message}`);
        rmdirQuietly(directory);
      }
    }
    // The daemon's own score first: lowering it needs CAP_SYS_RESOURCE, and without it the score stays.
    let oomFd: number | undefined;
    try {
      oomFd = openSync('/proc/self/oom_score_adj', 'r+');
      try {
        writeSync(oomFd, String(DAEMON_OOM_SCORE_ADJ));
      } catch (_error) {
        // Not privileged: the score it had.
      }
    } catch (_error) {
      oomFd = undefined;
    }
    this.#oomFd = oomFd;
    this.#ownOomScoreAdj = (kernelTextOrUndefined('/proc/self/oom_score_adj') ?? '0').trim();
    process.once('exit', () => this.close());
  }

  /** Takes the sessions' oom_score_adj for a spawn, or returns to the daemon's own. */
  oomScore(session: boolean): void {
    if (this.#oomFd === undefined) return;
    try {
      writeSync(this.#oomFd, session ? String(SESSION_OOM_SCORE_ADJ) : this.#ownOomScoreAdj);
    } catch (_error) {
      // A kernel that refuses: the child keeps the daemon's score, as without this.
    }
  }

  /** Whether a pids controller follows the sessions (v2 delegated, or the v1 hierarchy): groups are held to their totals. */
  get groupsHeld(): boolean {
    return this.v2.has('pids') || this.#v1.has('pids');
  }

  /**
   * The total of a group that names none: half of the fewest pids this host
   * and the cgroups above the daemon allow (the smallest of
   * `/proc/sys/kernel/pid_max`, `/proc/sys/kernel/threads-max` and every
   * finite `pids.max` from the daemon's cgroup up), so that one group alone
   * never takes what the world needs to go on: the daemon, its health, other
   * owners. Read once.
   */
  defaultGroupPids(): number {
    if (this.#defaultGroupPids !== undefined) return this.#defaultGroupPids;
    const bounds = [readNumber('/proc/sys/kernel/pid_max'), readNumber('/proc/sys/kernel/threads-max')];
    const pidsOrigin = this.v2.has('pids') ? dirname(this.#v2Directory) : this.#v1.get('pids')?.origin;
    if (pidsOrigin !== undefined) bounds.push(...finitePidsMaxUpFrom(pidsOrigin));
    const fewest = Math.min(...bounds.filter((bound): bound is number => bound !== undefined && bound > 0), MAX_PIDS);
    this.#defaultGroupPids = Math.max(1, Math.floor(fewest / 2));
    return this.#defaultGroupPids;
  }

  /**
   * Readies the cgroup of a group before a session's cell is made in it: on
   * v2, `v2Directory` hands the enabled controllers down and its `pids.max`
   * holds the group's total; on v1, the group's cgroup in the pids hierarchy,
   * with the total. Answers the total.
   * @throws {ProviderError} INVALID_ARGUMENT when the kernel refuses the total.
   */
  group(v2Directory: string, group: CellGroup): number {
    const total = group.pids ?? this.defaultGroupPids();
    if (this.v2.size > 0) writeFileSync(join(v2Directory, 'cgroup.subtree_control'), [...this.v2].map((controller) => `+${controller}`).join(' '));
    if (this.v2.has('pids')) writeControl(join(v2Directory, 'pids.max'), String(total), 'pids');
    const pids = this.#v1.get('pids');
    if (pids !== undefined) writeControl(join(makeCgroup(join(pids.directory, group.key)), 'pids.max'), String(total), 'pids');
    return total;
  }

  /**
   * The v1 cgroups of the session cgroup `key` (in `group`) that this
   * process made in its previous image, deepest first, its group's last:
   * what goes with the adopted cell.
   */
  adoptedV1(key: string, group: string | undefined): string[] {
    const found: string[] = [];
    for (const [controller, hierarchy] of this.#v1) {
      const path = controller === 'pids' && group !== undefined ? join(hierarchy.directory, group, key) : join(hierarchy.directory, key);
      if (existsSync(path)) found.push(path);
    }
    const pids = this.#v1.get('pids');
    if (group !== undefined && pids !== undefined) found.push(join(pids.directory, group));
    return found;
  }

  /** Which limits can be enforced, and why not the others; the total of a group that names none, where groups are held. */
  support(): LimitSupport {
    const supported: LimitName[] = [];
    const unsupported: { name: LimitName; reason: string }[] = [];
    const needs: Record<LimitName, 'memory' | 'pids' | 'cpu'> = { memoryBytes: 'memory', pids: 'pids', cpu: 'cpu' };
    for (const name of LIMIT_NAMES) {
      const controller = needs[name];
      if (this.v2.has(controller) || this.#v1.has(controller)) supported.push(name);
      else {
        const reason = this.#v1Reasons.get(controller);
        unsupported.push({
          name,
          reason: `no ${controller} controller: not delegated to cgroup v2 here, no v1 hierarchy of it${reason === undefined ? '' : ` (${reason})`}`,
        });
      }
    }
    return { supported, unsupported, ...(this.groupsHeld ? { groupPids: this.defaultGroupPids() } : {}) };
  }

  /**
   * The limits and accounting of a new session cgroup at `v2Path` named
   * `key`; in `group`'s cgroup (readied by {@link group}, `v2Path`'s parent
   * on v2) when given, held to its `total`.
   * @throws {ProviderError} INVALID_ARGUMENT for a limit this host cannot enforce, naming it.
   */
  cell(key: string, v2Path: string, limits: SessionLimits | undefined, group?: { readonly key: string; readonly total: number }): CellControls {
    assertLimits(limits);
    const support = this.support();
    for (const name of limitsAsked(limits)) {
      const missing = support.unsupported.find((entry) => entry.name === name);
      if (missing !== undefined) throw new ProviderError('INVALID_ARGUMENT', `limits.${name}: this host cannot enforce it: ${missing.reason}`);
    }
    const v1: { controller: V1Controller; path: string; tasks: number }[] = [];
    try {
      // The v2 limits, in the session's own cgroup.
      if (limits?.memoryBytes !== undefined) {
        if (this.v2.has('memory')) {
          writeControl(join(v2Path, 'memory.max'), String(limits.memoryBytes), 'memoryBytes');
          // Swap would let a session past its limit: it gets none.
          if (existsSync(join(v2Path, 'memory.swap.max'))) writeControl(join(v2Path, 'memory.swap.max'), '0', 'memoryBytes');
        }
      }
      if (limits?.pids !== undefined && this.v2.has('pids')) writeControl(join(v2Path, 'pids.max'), String(limits.pids), 'pids');
      if (limits?.cpu !== undefined && this.v2.has('cpu')) writeControl(join(v2Path, 'cpu.max'), `${cpuQuota(limits.cpu)} ${CPU_PERIOD_US}`, 'cpu');
      // The v1 cgroups: cpuacct and memory always where there (usage), pids and cpu when limited.
      for (const [controller, hierarchy] of this.#v1) {
        const wanted =
          controller === 'cpuacct' ||
          controller === 'memory' ||
          (controller === 'pids' && (limits?.pids !== undefined || group !== undefined)) ||
          (controller === 'cpu' && limits?.cpu !== undefined);
        if (!wanted) continue;
        // Only the pids hierarchy holds groups: the group's total is counted there.
        const path = makeCgroup(controller === 'pids' && group !== undefined ? join(hierarchy.directory, group.key, key) : join(hierarchy.directory, key));
        v1.push({ controller, path, tasks: openSync(join(path, 'tasks'), 'w') });
        if (controller === 'memory' && limits?.memoryBytes !== undefined) {
          writeControl(join(path, 'memory.limit_in_bytes'), String(limits.memoryBytes), 'memoryBytes');
          // With swap accounting, memory and swap together: swap would let a session past its limit.
          if (existsSync(join(path, 'memory.memsw.limit_in_bytes')))
            writeControl(join(path, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes), 'memoryBytes');
        }
        if (controller === 'pids' && limits?.pids !== undefined) writeControl(join(path, 'pids.max'), String(limits.pids), 'pids');
        if (controller === 'cpu' && limits?.cpu !== undefined) {
          writeControl(join(path, 'cpu.cfs_period_us'), String(CPU_PERIOD_US), 'cpu');
          writeControl(join(path, 'cpu.cfs_quota_us'), String(cpuQuota(limits.cpu)), 'cpu');
        }
      }
    } catch (error) {
      for (const entry of v1) {
        closeQuietly(entry.tasks);
        rmdirQuietly(entry.path);
      }
      throw error;
    }
    let groupPidsFile: string | undefined;
    if (group !== undefined) {
      if (this.v2.has('pids')) groupPidsFile = join(dirname(v2Path), 'pids.max');
      else if (this.#v1.has('pids')) groupPidsFile = join(this.#v1.get('pids')!.directory, group.key, 'pids.max');
    }
    return new CellControls(this, v2Path, v1, limits ?? {}, groupPidsFile === undefined ? undefined : { pidsFile: groupPidsFile, total: group!.total });
  }

  /**
   * Moves this process's main thread, the one calling (the v1 hierarchies are
   * used from it only), into the v1 cgroups `cells` (by their `tasks`
   * descriptors). It is named as `0`, the writer itself: the kernel moves the
   * writer without the lock that holds every thread group still (a thread
   * named by its id takes it, and waits for an RCU grace period, long on a
   * busy host).
   */
  enter(cells: readonly { tasks: number }[]): void {
    for (const cell of cells) writeSync(cell.tasks, CALLING_THREAD);
  }

  /**
   * Moves this process's threads back to its own v1 cgroups: the main
   * thread, and, when the spawn started `threads` (node-pty's fork starts one
   * to wait for the child, born in the forking thread's cgroups), every
   * thread of this process the cells' `tasks` list. A spawn that starts none
   * (posix_spawn, Node's spawn) moves the main thread only, as {@link enter}.
   * @throws when one refuses.
   */
  leave(cells: readonly { controller: V1Controller; path: string }[], threads: number): void {
    let failure: Error | undefined;
    for (const cell of cells) {
      const hierarchy = this.#v1.get(cell.controller)!;
      const tids = threads === 0 ? [CALLING_THREAD] : new Set([CALLING_THREAD, ...ownThreadsIn(cell.path)]);
      for (const tid of tids) {
        try {
          writeSync(hierarchy.back, tid);
        } catch (_error) {
          try {
            writeFileSync(join(hierarchy.origin, 'tasks'), tid);
          } catch (error) {
            // A thread that ended meanwhile is no failure.
            if (tid === CALLING_THREAD || existsSync(`/proc/self/task/${tid}`)) failure = error as Error;
          }
        }
      }
    }
    if (failure !== undefined) throw failure;
  }

  close(): void {
    if (this.#oomFd !== undefined) closeQuietly(this.#oomFd);
    for (const hierarchy of this.#v1.values()) {
      closeQuietly(hierarchy.back);
      // The groups' cgroups left empty, then the daemon's own; one still in use stays for a later start.
      for (const directory of descendantsOf(hierarchy.directory)) rmdirQuietly(directory);
      rmdirQuietly(hierarchy.directory);
    }
    this.#v1.clear();
  }
}

/**
 * Removes the v1 cgroups that daemons which died (SIGKILL, a crash) left
 * beside this one's: every `execworld-<pid>` whose pid runs no more, and the
 * session cgroups in it. v1 has no cgroup.kill: their processes are in the
 * same daemon's v2 cgroups too, which its sweep kills; a cgroup that still
 * has a process is left for a later start.
 */
function sweepStaleV1(origin: string, stale: (name: string) => boolean): void {
  let names: string[];
  try {
    names = readdirSync(origin);
  } catch (_error) {
    return;
  }
  for (const name of names) {
    if (!stale(name)) continue;
    const directory = join(origin, name);
    // Deepest first: the session cgroups in a group's, then the group's.
    for (const child of descendantsOf(directory)) rmdirQuietly(child);
    rmdirQuietly(directory);
  }
}

/** How many threads this process has (64 where /proc cannot tell). */
function ownThreadCount(): number {
  try {
    return readdirSync('/proc/self/task').length;
  } catch (_error) {
    return 64;
  }
}

/** This process's threads in the v1 cgroup at `path` (its `tasks`), the main one left out. */
function ownThreadsIn(path: string): string[] {
  const main = String(process.pid);
  return (kernelTextOrUndefined(join(path, 'tasks')) ?? '').split('\n').filter((tid) => tid !== '' && tid !== main && existsSync(`/proc/self/task/${tid}`));
}

/**
 * The finite `pids.max` of the cgroup at `directory` and of each one above it,
 * up to the first without the file (the root of its hierarchy, or of the
 * cgroup namespace's view).
 */
export function finitePidsMaxUpFrom(directory: string): number[] {
  const found: number[] = [];
  for (let dir = directory; ; dir = dirname(dir)) {
    const text = kernelTextOrUndefined(join(dir, 'pids.max'));
    if (text === undefined) break;
    if (/^\d+$/.test(text.trim())) found.push(Number(text.trim()));
    if (dirname(dir) === dir) break;
  }
  return found;
}

/** cpu.max's / cfs_quota_us's quota for `cores` at the period. */
function cpuQuota(cores: number): number {
  return Math.max(1000, Math.round(cores * CPU_PERIOD_US));
}

function makeCgroup(path: string): string {
  try {
    mkdirSync(path, { mode: 0o755 });
  } catch (error) {
    // One left by an earlier process with this pid: taken over, its counters with it.
    if (errnoCode(error) !== 'EEXIST') throw error;
  }
  return path;
}

function rmdirQuietly(path: string): boolean {
  try {
    rmdirSync(path);
    return true;
  } catch (error) {
    return errnoCode(error) === 'ENOENT';
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch (_error) {
    // Closed.
  }
}

function parseMounts(mountinfo: string): MountInfoEntry[] {
  const entries: MountInfoEntry[] = [];
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ');
    const separator = fields.indexOf('-', 6);
    if (separator < 0) continue;
    const [root, mountPoint, mountOptions] = [fields[3], fields[4], fields[5]];
    const fsType = fields[separator + 1];
    if (root === undefined || mountPoint === undefined || mountOptions === undefined || fsType === undefined) continue;
    const readOnly = mountOptions.split(',').includes('ro') || (fields[separator + 3] ?? '').split(',').includes('ro');
    entries.push({ root, mountPoint, fsType, readOnly });
  }
  return entries;
}

/**
 * One run's descriptor of v2 `memory.peak`, reset through it: the peak read
 * back through it is the run's. Read at the start of the file each time
 * (pread at 0: a kernfs file shows its value from the start).
 */
class RunPeak {
  #fd: number | undefined;
  #last: number | null = null;

  private constructor(fd: number) {
    this.#fd = fd;
  }

  /** The descriptor, reset; undefined where the file is missing or the kernel refuses the reset (before 6.12). */
  static open(path: string): RunPeak | undefined {
    let fd: number;
    try {
      fd = openSync(path, 'r+');
    } catch (_error) {
      return undefined;
    }
    try {
      writeSync(fd, 'reset', 0);
    } catch (_error) {
      closeQuietly(fd);
      return undefined;
    }
    return new RunPeak(fd);
  }

  /** The run's peak so far; the last one read once closed. */
  read(): number | null {
    if (this.#fd === undefined) return this.#last;
    const buffer = Buffer.alloc(32);
    let text: string;
    try {
      text = buffer.toString('latin1', 0, readSync(this.#fd, buffer, 0, buffer.length, 0)).trim();
    } catch (_error) {
      return this.#last;
    }
    if (/^\d+$/.test(text)) this.#last = Number(text);
    return this.#last;
  }

  close(): void {
    if (this.#fd === undefined) return;
    this.read();
    closeQuietly(this.#fd);
    this.#fd = undefined;
  }
}

/** The limits and counters of one session's cgroups. */
export class CellControls {
  readonly limits: SessionLimits;
  readonly #controllers: CgroupControllers;
  readonly #v2Path: string;
  readonly #v1: { controller: V1Controller; path: string; tasks: number }[];
  #released = false;
  /** The usage read just before the cgroups were removed, and its counters. */
  #final: SessionUsage | undefined;
  #lastCounters: UsageCounters | undefined;
  /** The open run's descriptor of v2 `memory.peak`, reset for it; at most one. */
  #runPeak: RunPeak | undefined;
  /** A memory controller follows the session (its memory now is known while it runs). */
  readonly #memoryFollowed: boolean;
  /** The `pids.max` of the session's group and the group's total, when it is in one. */
  readonly #group: { readonly pidsFile: string; readonly total: number } | undefined;

  constructor(
    controllers: CgroupControllers,
    v2Path: string,
    v1: { controller: V1Controller; path: string; tasks: number }[],
    limits: SessionLimits,
    group?: { readonly pidsFile: string; readonly total: number },
  ) {
    this.#controllers = controllers;
    this.#v2Path = v2Path;
    this.#v1 = v1;
    this.#group = group;
    this.#memoryFollowed = controllers.v2.has('memory') || v1.some((entry) => entry.controller === 'memory');
    this.limits = limits;
  }

  /**
   * Runs `spawn` with this process's main thread in the session's v1
   * cgroups, and brings it and the `threads` the spawn starts back. The
   * daemon's own tasks in the session's pids cgroup for the fork (v1: the
   * main thread and those; v2: every thread of the process and those) are
   * added to its pids limit, and to its group's total, for that instant and
   * no longer: the session's own processes never have more than their limit,
   * nor its group's than the total. (The kernel lets a task move into a
   * cgroup past its limit, and refuses a fork there: without the room, the
   * daemon's own threads would take a full group's last pids.)
   */
  inside<T>(spawn: () => T, threads = 0): T {
    const v1 = this.#released ? [] : this.#v1;
    const pids = this.limits.pids;
    const pidsFile = pids === undefined ? undefined : this.#controllers.v2.has('pids') ? join(this.#v2Path, 'pids.max') : this.#pidsMaxV1();
    // v1 counts the main thread and the threads the spawn starts (`threads`); v2 the whole process and those.
    const room = (this.#controllers.v2.has('pids') ? ownThreadCount() : 1) + threads;
    const group = this.#released ? undefined : this.#group;
    if (pids !== undefined && pidsFile !== undefined) writeControl(pidsFile, String(pids + room), 'pids');
    try {
      if (group !== undefined) writeControl(group.pidsFile, String(group.total + room), 'pids');
    } catch (error) {
      if (pids !== undefined && pidsFile !== undefined) writeControl(pidsFile, String(pids), 'pids');
      throw error;
    }
    this.#controllers.oomScore(true);
    try {
      this.#controllers.enter(v1);
    } catch (error) {
      this.#restore(v1, 0, pids, pidsFile, group);
      throw error;
    }
    try {
      return spawn();
    } finally {
      this.#restore(v1, threads, pids, pidsFile, group);
    }
  }

  #restore(
    v1: readonly { controller: V1Controller; path: string }[],
    threads: number,
    pids: number | undefined,
    pidsFile: string | undefined,
    group: { readonly pidsFile: string; readonly total: number } | undefined,
  ): void {
    this.#controllers.oomScore(false);
    try {
      this.#controllers.leave(v1, threads);
    } finally {
      try {
        if (pids !== undefined && pidsFile !== undefined) writeControl(pidsFile, String(pids), 'pids');
      } finally {
        if (group !== undefined) writeControl(group.pidsFile, String(group.total), 'pids');
      }
    }
  }

  /**
   * Whether the session's group holds its whole total now (its `pids.current`
   * at or past its `pids.max`): a fork of any of its sessions is refused.
   * False where the session is in no group or the files cannot be read.
   */
  groupFull(): boolean {
    if (this.#group === undefined) return false;
    const current = readNumber(join(dirname(this.#group.pidsFile), 'pids.current'));
    return current !== undefined && current >= this.#group.total;
  }

  /** The total of the session's group, when it is in one whose pids are held. */
  get groupPids(): number | undefined {
    return this.#group?.total;
  }

  #pidsMaxV1(): string | undefined {
    const path = this.#path('pids');
    return path === undefined ? undefined : join(path, 'pids.max');
  }

  #path(controller: V1Controller): string | undefined {
    return this.#v1.find((entry) => entry.controller === controller)?.path;
  }

  /** The session's counters so far, read from its cgroups. */
  #counters(): UsageCounters {
    // A v2 cgroup's cpu.stat counts user and system time whether or not the cpu controller is enabled
    // in it (and to the microsecond, where v1's cpuacct counts in ticks): one read, on a hybrid host too.
    // Only a kernel whose v2 cpu.stat lacks them is asked v1's cpuacct.
    const v2Stat = kernelTextOrUndefined(join(this.#v2Path, 'cpu.stat'));
    const counters: UsageCounters = { ...ZERO_COUNTERS };
    const userUs = keyed(v2Stat, 'user_usec');
    const systemUs = keyed(v2Stat, 'system_usec');
    const cpuacct = userUs === undefined || systemUs === undefined ? this.#path('cpuacct') : undefined;
    if (cpuacct !== undefined) {
      counters.cpuUserMs = (readNumber(join(cpuacct, 'cpuacct.usage_user')) ?? 0) / 1e6;
      counters.cpuSystemMs = (readNumber(join(cpuacct, 'cpuacct.usage_sys')) ?? 0) / 1e6;
    } else {
      counters.cpuUserMs = (userUs ?? 0) / 1000;
      counters.cpuSystemMs = (systemUs ?? 0) / 1000;
    }
    const memory = this.#path('memory');
    if (this.#controllers.v2.has('memory')) {
      counters.peakMemoryBytes = readNumber(join(this.#v2Path, 'memory.peak')) ?? null;
      const events = kernelTextOrUndefined(join(this.#v2Path, 'memory.events'));
      counters.oomKills = keyed(events, 'oom_kill') ?? 0;
      counters.memoryFails = keyed(events, 'max') ?? 0;
    } else if (memory !== undefined) {
      counters.peakMemoryBytes = readNumber(join(memory, 'memory.max_usage_in_bytes')) ?? null;
      counters.oomKills = keyed(kernelTextOrUndefined(join(memory, 'memory.oom_control')), 'oom_kill') ?? 0;
      counters.memoryFails = this.limits.memoryBytes === undefined ? 0 : (readNumber(join(memory, 'memory.failcnt')) ?? 0);
    }
    const pids = this.#controllers.v2.has('pids') ? this.#v2Path : this.#path('pids');
    if (pids !== undefined && this.limits.pids !== undefined) counters.pidsMax = keyed(kernelTextOrUndefined(join(pids, 'pids.events')), 'max') ?? 0;
    if (this.limits.cpu !== undefined) {
      const stat = this.#controllers.v2.has('cpu') ? v2Stat : kernelTextOrUndefined(join(this.#path('cpu') ?? '/nonexistent', 'cpu.stat'));
      counters.throttled = keyed(stat, 'nr_throttled') ?? 0;
    }
    return counters;
  }

  /** The session's usage so far, read from its cgroups. */
  usage(): SessionUsage {
    if (this.#final !== undefined) return this.#final;
    return usageBetween(ZERO_COUNTERS, this.#counters());
  }

  /** Every limit the counters say the session ran into, memory first. */
  static #hits(counters: UsageCounters): ('memory' | 'pids' | 'cpu')[] {
    const hits: ('memory' | 'pids' | 'cpu')[] = [];
    if (counters.oomKills > 0 || counters.memoryFails > 0) hits.push('memory');
    if (counters.pidsMax > 0) hits.push('pids');
    if (counters.throttled > 0) hits.push('cpu');
    return hits;
  }

  /**
   * The session's counters for the daemon's metrics: the same files as
   * {@link usage}, and its memory in use now; once its cgroups are gone, the
   * last counters read before, and no file is read.
   */
  accounting(): SessionAccounting {
    const ended = this.#released;
    const counters = ended ? (this.#lastCounters ?? ZERO_COUNTERS) : this.#counters();
    let memoryBytes: number | null = null;
    const memory = this.#path('memory');
    if (ended) memoryBytes = this.#memoryFollowed ? 0 : null;
    else if (this.#controllers.v2.has('memory')) memoryBytes = readNumber(join(this.#v2Path, 'memory.current')) ?? null;
    else if (memory !== undefined) memoryBytes = readNumber(join(memory, 'memory.usage_in_bytes')) ?? null;
    return {
      cpuUserMs: Math.round(counters.cpuUserMs),
      cpuSystemMs: Math.round(counters.cpuSystemMs),
      memoryBytes,
      limitsHit: CellControls.#hits(counters),
      oomKills: counters.oomKills,
    };
  }

  /**
   * Starts measuring one run of a long-lived session (a persistent shell's
   * command): cpu and the limits hit as the difference over the run; peak
   * memory reset for it where the kernel allows, else the session's peak,
   * which `peakScope` says.
   *
   * v1: a write of 0 to `memory.max_usage_in_bytes` resets the cgroup's peak.
   * v2: since Linux 6.12 a write of any non-empty string to an open
   * descriptor of `memory.peak` resets the peak as seen through that
   * descriptor only (every other reader keeps the cgroup's own); the run
   * opens the file, writes `reset`, and reads its peak through the same
   * descriptor. An older kernel refuses it (5.19 to 6.11: the file has no
   * write, so opening it for writing fails with EACCES; a write that fails
   * is taken so too) or has no `memory.peak` (before 5.19): then the
   * session's peak. A cell holds at most one such descriptor, the open run's:
   * a new run closes the last one's, as do {@link UsageMeter.close} at the
   * run's end and the removal of the cgroups.
   */
  meter(): UsageMeter {
    const before = this.#counters();
    let peakScope: 'run' | 'session' = 'session';
    let peak: RunPeak | undefined;
    const memory = this.#path('memory');
    if (this.#controllers.v2.has('memory') && !this.#released) {
      this.#runPeak?.close();
      peak = RunPeak.open(join(this.#v2Path, 'memory.peak'));
      this.#runPeak = peak;
      if (peak !== undefined) peakScope = 'run';
    } else if (memory !== undefined) {
      try {
        writeFileSync(join(memory, 'memory.max_usage_in_bytes'), '0');
        peakScope = 'run';
      } catch (_error) {
        // The session's peak, then.
      }
    }
    const counters = (): UsageCounters => {
      const now = this.#final === undefined ? this.#counters() : this.#lastCounters!;
      return peak === undefined ? now : { ...now, peakMemoryBytes: peak.read() };
    };
    return {
      usage: () => ({ ...usageBetween(before, counters()), peakScope }),
      close: () => {
        peak?.close();
        if (this.#runPeak === peak) this.#runPeak = undefined;
      },
    };
  }

  /** Removes the session's v1 cgroups once empty; false while one is in use. */
  remove(): boolean {
    if (this.#released) return true;
    this.#runPeak?.close();
    this.#runPeak = undefined;
    this.#lastCounters = this.#counters();
    this.#final = usageBetween(ZERO_COUNTERS, this.#lastCounters);
    let removed = true;
    for (const entry of this.#v1) {
      if (!rmdirQuietly(entry.path)) removed = false;
    }
    if (!removed) this.#final = undefined;
    else {
      this.#released = true;
      for (const entry of this.#v1) closeQuietly(entry.tasks);
      this.#v1.length = 0;
      // The group's v1 cgroup goes with its last session's (the kernel refuses while another is in it).
      if (this.#group !== undefined && !this.#controllers.v2.has('pids')) rmdirQuietly(dirname(this.#group.pidsFile));
    }
    return removed;
  }
}
