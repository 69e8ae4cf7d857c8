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
 * Controllers are never enabled (no `cgroup.subtree_control` writes), so the
 * rule that a cgroup with controllers has no processes of its own never
 * applies; resource limits of the cgroups above still do.
 * @module
 */
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmdirSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Containment, SessionCell } from './containment.ts';

/** The fields of one `/proc/<pid>/mountinfo` line the detection needs. */
export interface MountInfoEntry {
  /** Where in the mounted filesystem the mount starts (field 4). */
  readonly root: string;
  /** Where it is mounted (field 5). */
  readonly mountPoint: string;
  readonly fsType: string;
  /** Mounted read-only, per mount or per superblock. */
  readonly readOnly: boolean;
}

/** Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`). */
function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_match, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** Parses `/proc/<pid>/mountinfo`; malformed lines are skipped. */
export function parseMountInfo(text: string): MountInfoEntry[] {
  const entries: MountInfoEntry[] = [];
  for (const line of text.split('\n')) {
    const fields = line.trim().split(' ');
    // Optional fields (shared:N, master:N) sit between field 6 and the '-' separator.
    const separator = fields.indexOf('-', 6);
    if (separator < 0 || fields.length < separator + 3) continue;
    const [root, mountPoint, mountOptions] = [fields[3], fields[4], fields[5]];
    const fsType = fields[separator + 1];
    const superOptions = fields[separator + 3] ?? '';
    if (root === undefined || mountPoint === undefined || mountOptions === undefined || fsType === undefined) continue;
    const readOnly = mountOptions.split(',').includes('ro') || superOptions.split(',').includes('ro');
    entries.push({ root: unescapeMountField(root), mountPoint: unescapeMountField(mountPoint), fsType, readOnly });
  }
  return entries;
}

/**
 * The cgroup v2 path of a process from its `/proc/<pid>/cgroup`: the `0::`
 * line, relative to the root of its cgroup namespace. Undefined without one
 * (a host with cgroup v1 only).
 */
export function parseProcCgroup(text: string): string | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('0::')) {
      const path = line.slice(3).trim();
      // A process outside its namespace's root sees a path like /../x: it cannot be reached.
      if (path.startsWith('/') && !path.split('/').includes('..')) return path;
    }
  }
  return undefined;
}

/**
 * The directories where cgroup `path` can be found on disk: for every
 * writable cgroup2 mount whose root contains it, in mount order.
 */
export function cgroupDirectories(mounts: readonly MountInfoEntry[], path: string): string[] {
  const found: string[] = [];
  for (const mount of mounts) {
    if (mount.fsType !== 'cgroup2' || mount.readOnly) continue;
    const root = mount.root === '/' ? '' : mount.root.replace(/\/$/, '');
    if (path !== root && !path.startsWith(`${root}/`) && root !== '') continue;
    const rest = path.slice(root.length);
    found.push(rest === '' || rest === '/' ? mount.mountPoint : join(mount.mountPoint, rest));
  }
  return found;
}

/** Why no cgroup containment is possible here. */
export class CgroupUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CgroupUnavailableError';
  }
}

export interface CgroupContainmentOptions {
  /** Test hook: the directory of the cgroup this process is in. @default found from /proc/self */
  readonly ownDirectory?: string;
  /** Name of this process's cgroup under its own. @default `execworld-<pid>` */
  readonly name?: string;
}

/** True while `pid` names a process that has not exited (a zombie has). */
export function processRuns(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch (_error) {
    return false;
  }
}

function errnoCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Whether the cgroup at `directory`, descendants included, has no live process. A missing one is empty. */
export function cgroupEmpty(directory: string): boolean {
  try {
    return /^populated 0$/m.test(readFileSync(join(directory, 'cgroup.events'), 'latin1'));
  } catch (error) {
    // Only a missing cgroup is known empty: an unreadable one is no evidence.
    return errnoCode(error) === 'ENOENT';
  }
}

/** The cgroups directly below `directory`. */
function childCgroups(directory: string): string[] {
  try {
    return readdirSync(directory, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(directory, entry.name));
  } catch (_error) {
    return [];
  }
}

/** The cgroups below `directory`, deepest first. */
function descendantsOf(directory: string): string[] {
  return childCgroups(directory).flatMap((child) => [...descendantsOf(child), child]);
}

/** The pids in the cgroup at `directory` and the cgroups below it. */
export function cgroupPids(directory: string): number[] {
  const pids: number[] = [];
  for (const dir of [directory, ...descendantsOf(directory)]) {
    try {
      for (const line of readFileSync(join(dir, 'cgroup.procs'), 'latin1').split('\n')) if (line !== '') pids.push(Number(line));
    } catch (_error) {
      // Removed meanwhile: nothing in it.
    }
  }
  return pids;
}

/** Writes `1` to the cgroup's `cgroup.kill`: SIGKILL to everything in it and below. */
export function killCgroup(directory: string): void {
  try {
    writeFileSync(join(directory, 'cgroup.kill'), '1');
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') throw error;
  }
}

/** Removes the cgroup at `directory` and those below it; false when one is still in use. */
export function removeCgroup(directory: string, keepRoot = false): boolean {
  let removed = true;
  for (const dir of [...descendantsOf(directory), ...(keepRoot ? [] : [directory])]) {
    try {
      rmdirSync(dir);
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') removed = false;
    }
  }
  return removed;
}

/** Kills the cgroup, waits until it is empty (up to `timeoutMs`), then removes it. */
export async function killAndRemoveCgroup(directory: string, timeoutMs: number, keepRoot = false): Promise<boolean> {
  killCgroup(directory);
  const deadline = Date.now() + timeoutMs;
  while (!cgroupEmpty(directory)) {
    if (Date.now() > deadline) return false;
    // Never what keeps a host process alive.
    await sleep(10, undefined, { ref: false });
  }
  return removeCgroup(directory, keepRoot);
}

const CELL_NAME = /^execworld-(\d+)$/;
/** How long a start waits for a dead daemon's cgroup to empty after cgroup.kill. */
const STALE_KILL_TIMEOUT_MS = 10_000;

/**
 * Finds the cgroup directory of this process: the cgroup2 mount that reaches
 * the `0::` path of /proc/self/cgroup and whose cgroup.procs lists this process.
 */
export function locateOwnCgroup(): string {
  let mountinfo: string;
  let own: string | undefined;
  try {
    mountinfo = readFileSync('/proc/self/mountinfo', 'latin1');
    own = parseProcCgroup(readFileSync('/proc/self/cgroup', 'latin1'));
  } catch (error) {
    throw new CgroupUnavailableError('cannot read /proc/self/mountinfo or /proc/self/cgroup', { cause: error });
  }
  if (own === undefined) throw new CgroupUnavailableError('this process is in no cgroup v2 hierarchy');
  const candidates = cgroupDirectories(parseMountInfo(mountinfo), own);
  const pid = String(process.pid);
  for (const directory of candidates) {
    try {
      if (readFileSync(join(directory, 'cgroup.procs'), 'latin1').split('\n').includes(pid)) return directory;
    } catch (_error) {
      // Not this one.
    }
  }
  throw new CgroupUnavailableError(`no writable cgroup2 mount shows this process's cgroup ${own}`);
}

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
  readonly #originProcs: number;
  readonly #pid: string;
  readonly #cells = new Set<CgroupCell>();
  /** The cell this process could not leave after a spawn; it is never cgroup.kill-ed. */
  #stuckIn: CgroupCell | undefined;

  /** @throws {CgroupUnavailableError} when no cgroup can be made and entered here. */
  constructor(options: CgroupContainmentOptions = {}) {
    if (process.platform !== 'linux') throw new CgroupUnavailableError(`cgroups are Linux only, not ${process.platform}`);
    this.#pid = String(process.pid);
    this.origin = options.ownDirectory ?? locateOwnCgroup();
    this.directory = join(this.origin, options.name ?? `execworld-${process.pid}`);
    try {
      mkdirSync(this.directory, { mode: 0o755 });
    } catch (error) {
      if (errnoCode(error) !== 'EEXIST') throw new CgroupUnavailableError(`cannot create ${this.directory}: ${(error as Error).message}`, { cause: error });
      // Left by an earlier process with this pid: what it left runs no more from now on. Only
      // the cgroups it left are removed, once empty; new cells are made beside them.
      const left = childCgroups(this.directory);
      killCgroup(this.directory);
      void Promise.all(left.map((dir) => killAndRemoveCgroup(dir, STALE_KILL_TIMEOUT_MS))).catch(() => undefined);
    }
    try {
      if (!existsSync(join(this.directory, 'cgroup.kill'))) throw new CgroupUnavailableError('cgroup.kill is missing (Linux 5.14 or later is needed)');
      this.#originProcs = openSync(join(this.origin, 'cgroup.procs'), 'w');
    } catch (error) {
      removeCgroup(this.directory);
      throw error instanceof CgroupUnavailableError ? error : new CgroupUnavailableError(`cannot open ${this.origin}/cgroup.procs: ${(error as Error).message}`, { cause: error });
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

  create(sessionKey: string): CgroupCell {
    if (!/^[\w.-]+$/.test(sessionKey)) throw new Error(`session key ${JSON.stringify(sessionKey)} is not a cgroup name`);
    let path = join(this.directory, sessionKey);
    for (let attempt = 1; ; attempt += 1) {
      try {
        mkdirSync(path, { mode: 0o755 });
        break;
      } catch (error) {
        // A cgroup of that name left by an earlier process with this pid is not reused.
        if (errnoCode(error) !== 'EEXIST' || attempt >= 100) throw error;
        path = join(this.directory, `${sessionKey}.${attempt}`);
      }
    }
    let procs: number;
    try {
      procs = openSync(join(path, 'cgroup.procs'), 'w');
    } catch (error) {
      removeCgroup(path);
      throw error;
    }
    const cell = new CgroupCell(this, sessionKey, path, procs);
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
      const pid = CELL_NAME.exec(name)?.[1];
      return pid !== undefined && pid !== this.#pid && !runs(Number(pid));
    });
    const results = await Promise.all(
      stale.map(async (name) => ((await killAndRemoveCgroup(join(this.origin, name), STALE_KILL_TIMEOUT_MS)) ? [join(this.origin, name)] : [])),
    );
    return results.flat();
  }

  /** Moves this process into `cell`, runs `spawn`, and moves it back whatever happens. */
  spawnInside<T>(cell: CgroupCell, procs: number, spawn: () => T): T {
    if (this.#stuckIn !== undefined) this.#leave();
    writeSync(procs, this.#pid);
    try {
      return spawn();
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
  readonly path: string;
  readonly #containment: CgroupContainment;
  #procs: number | undefined;
  #removed = false;

  constructor(containment: CgroupContainment, key: string, path: string, procs: number) {
    this.#containment = containment;
    this.key = key;
    this.path = path;
    this.#procs = procs;
  }

  spawnInside<T>(spawn: () => T): T {
    if (this.#procs === undefined) throw new Error(`cgroup ${this.path} was removed`);
    return this.#containment.spawnInside(this, this.#procs, spawn);
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
    if (!removeCgroup(this.path)) return;
    this.#removed = true;
    if (this.#procs !== undefined) closeSync(this.#procs);
    this.#procs = undefined;
    this.#containment.forget(this);
  }
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
