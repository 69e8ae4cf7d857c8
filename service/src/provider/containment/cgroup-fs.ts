/**
 * cgroup v2 as files: where this process's cgroup is mounted (mountinfo and
 * /proc/self/cgroup), and the cgroup operations the containment and the
 * crash recovery use (list, kill, wait empty, remove).
 * @module
 */
import { readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { readKernelText } from '../kernel-text.ts';

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

/** True while `pid` names a process that has not exited (a zombie has). */
export function processRuns(pid: number): boolean {
  try {
    const stat = readKernelText(`/proc/${pid}/stat`);
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch (_error) {
    return false;
  }
}

export function errnoCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Whether the cgroup at `directory`, descendants included, has no live process. A missing one is empty. */
export function cgroupEmpty(directory: string): boolean {
  try {
    return /^populated 0$/m.test(readKernelText(join(directory, 'cgroup.events')));
  } catch (error) {
    // Only a missing cgroup is known empty: an unreadable one is no evidence.
    return errnoCode(error) === 'ENOENT';
  }
}

/** The cgroups directly below `directory`. */
export function childCgroups(directory: string): string[] {
  try {
    return readdirSync(directory, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(directory, entry.name));
  } catch (_error) {
    return [];
  }
}

/** The cgroups below `directory`, deepest first. */
export function descendantsOf(directory: string): string[] {
  return childCgroups(directory).flatMap((child) => [...descendantsOf(child), child]);
}

/** The pids in the cgroup at `directory` and the cgroups below it. */
export function cgroupPids(directory: string): number[] {
  const pids: number[] = [];
  for (const dir of [directory, ...descendantsOf(directory)]) {
    try {
      for (const line of readKernelText(join(dir, 'cgroup.procs')).split('\n')) if (line !== '') pids.push(Number(line));
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

/**
 * Finds the cgroup directory of this process: the cgroup2 mount that reaches
 * the `0::` path of /proc/self/cgroup and whose cgroup.procs lists this process.
 */
export function locateOwnCgroup(): string {
  let mountinfo: string;
  let own: string | undefined;
  try {
    mountinfo = readKernelText('/proc/self/mountinfo');
    own = parseProcCgroup(readKernelText('/proc/self/cgroup'));
  } catch (error) {
    throw new CgroupUnavailableError('cannot read /proc/self/mountinfo or /proc/self/cgroup', { cause: error });
  }
  if (own === undefined) throw new CgroupUnavailableError('this process is in no cgroup v2 hierarchy');
  const candidates = cgroupDirectories(parseMountInfo(mountinfo), own);
  const pid = String(process.pid);
  for (const directory of candidates) {
    try {
      if (readKernelText(join(directory, 'cgroup.procs')).split('\n').includes(pid)) return directory;
    } catch (_error) {
      // Not this one.
    }
  }
  throw new CgroupUnavailableError(`no writable cgroup2 mount shows this process's cgroup ${own}`);
}
