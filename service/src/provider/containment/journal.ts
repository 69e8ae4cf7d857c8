/**
 * What a daemon records in its state directory so that the next daemon ends
 * the sessions it left when it died without cleaning up (SIGKILL, a crash,
 * the OOM killer): one file per daemon, `<dir>/<pid>-<start time>.json` (a
 * daemon in a container often gets the same pid each time it starts), naming
 * the daemon by identity, its cgroup of session cgroups when it has one, and
 * otherwise each session's processes by identity.
 *
 * The file is replaced atomically (write, then rename) on every change, so a
 * daemon killed at any moment leaves a whole file, at most one change behind.
 *
 * A record is an order to kill, so it is trusted only as far as the daemon
 * alone could have written it. A directory or file that is not the daemon's
 * uid's, or that its group or others may write, is refused whole and left as
 * it is (with a warning, for the operator to look at); the directory is held
 * by a descriptor and its files opened without following links, so nothing
 * can be swapped in between the check and the read. Within a record that
 * passes, each order is checked against what the daemon itself could have
 * made: a cgroup only when it is the `execworld-<pid>` cgroup of the
 * record's own daemon, directly under the cgroup this process lives in (where
 * a daemon beside it makes its own); a process only while it still has its
 * recorded start time and runs as a uid a session could have run as (the
 * daemon's own, or a user its token file maps an owner to), and never this
 * process or one of its ancestors.
 * @module
 */
import { closeSync, constants, fstatSync, mkdirSync, openSync, readdirSync, readSync, renameSync, rmSync, writeSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { ProcessIndex, type ProcessIdentity, type ProcessInspector } from '../inspect/inspector.ts';
import { LinuxInspector } from '../inspect/linux.ts';
import { readKernelText } from '../kernel-text.ts';
import { daemonCgroupName } from './cgroup.ts';
import { errnoCode, killAndRemoveCgroup, locateOwnCgroup, processRuns } from './cgroup-fs.ts';
import type { Containment } from './containment.ts';
import { PROC_FD } from '../fs/anchor.ts';

interface JournalFile {
  readonly daemon: ProcessIdentity;
  /** The daemon's cgroup of session cgroups. */
  cgroup?: string;
  /** Session key → its processes when it was last recorded. */
  readonly sessions: Record<string, ProcessIdentity[]>;
}

/** How long recovery waits for a killed cgroup to empty. */
const CGROUP_KILL_TIMEOUT_MS = 10_000;
/** SIGKILL rounds of recovery, against members forked while earlier ones died. */
const KILL_ROUNDS = 4;
/** The largest record read; a larger file is refused (a record holds some 40 bytes per process). */
const MAX_JOURNAL_BYTES = 16 * 1024 * 1024;
/** Through a descriptor's magic link, where there is /proc. */

function isIdentity(value: unknown): value is ProcessIdentity {
  const candidate = value as ProcessIdentity | null;
  return (
    typeof candidate === 'object' && candidate !== null && Number.isSafeInteger(candidate.pid) && candidate.pid > 0 && typeof candidate.started === 'string'
  );
}

function parseJournal(text: string): JournalFile | undefined {
  try {
    const parsed = JSON.parse(text) as Partial<JournalFile>;
    if (!isIdentity(parsed.daemon) || typeof parsed.sessions !== 'object' || parsed.sessions === null) return undefined;
    const sessions: Record<string, ProcessIdentity[]> = {};
    for (const [key, list] of Object.entries(parsed.sessions)) if (Array.isArray(list)) sessions[key] = list.filter(isIdentity);
    return { daemon: parsed.daemon, sessions, ...(typeof parsed.cgroup === 'string' ? { cgroup: parsed.cgroup } : {}) };
  } catch (_error) {
    return undefined;
  }
}

/** The file name of the record of `daemon`. */
function journalName(daemon: ProcessIdentity): string {
  return `${daemon.pid}-${daemon.started}.json`;
}

/** Why a journal directory or file may not be trusted: another uid's, or writable by group or others. */
function ownershipProblem(stats: Stats): string | undefined {
  const uid = process.geteuid?.();
  if (uid !== undefined && stats.uid !== uid) return `it belongs to uid ${stats.uid}, not to the daemon's uid ${uid}`;
  if ((stats.mode & 0o022) !== 0) return `its group or others may write it (mode ${(stats.mode & 0o7777).toString(8).padStart(4, '0')})`;
  return undefined;
}

/** A journal directory held open by descriptor, its entries reached through it. */
interface HeldDirectory {
  readonly fd: number;
  /** The path to the entry `name` of exactly this directory. */
  entry(name: string): string;
}

/**
 * Opens the journal directory without following a link, and checks that only
 * this uid may write it. Undefined when it does not exist.
 */
function holdDirectory(directory: string): HeldDirectory | { refused: string } | undefined {
  let fd: number;
  try {
    fd = openSync(directory, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = errnoCode(error);
    if (code === 'ENOENT') return undefined;
    return { refused: code === 'ELOOP' || code === 'ENOTDIR' ? 'it is not a directory (a symbolic link, or a file)' : `it cannot be opened (${code})` };
  }
  const problem = ownershipProblem(fstatSync(fd));
  if (problem !== undefined) {
    closeSync(fd);
    return { refused: problem };
  }
  return { fd, entry: (name) => (PROC_FD ? `/proc/self/fd/${fd}/${name}` : join(directory, name)) };
}

/**
 * Makes the journal directory (0700) when it is missing; says why it may not
 * be used when it is there and another uid's, or others may write it. A
 * daemon writes no journal into such a directory: a record there could be
 * replaced by whoever else may write it.
 */
export function journalDirectoryProblem(directory: string): string | undefined {
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const held = holdDirectory(directory);
  if (held === undefined) return 'it vanished as it was made';
  if ('refused' in held) return held.refused;
  closeSync(held.fd);
  return undefined;
}

/** Reads a journal file, checked like the directory: a regular file of this uid that only it may write, of a bounded size. */
function readJournalFile(path: string): { text: string } | { refused: string } | undefined {
  let fd: number;
  try {
    // Not following a link, and not blocking on a FIFO put in its place.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = errnoCode(error);
    // Removed meanwhile (by the daemon that wrote it, or another start): nothing to do.
    if (code === 'ENOENT') return undefined;
    return { refused: code === 'ELOOP' ? 'it is a symbolic link' : `it cannot be opened (${code})` };
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) return { refused: 'it is not a regular file' };
    const problem = ownershipProblem(stats);
    if (problem !== undefined) return { refused: problem };
    if (stats.size > MAX_JOURNAL_BYTES) return { refused: `it is larger than ${MAX_JOURNAL_BYTES} bytes` };
    const buffer = Buffer.alloc(stats.size);
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, length);
      if (read === 0) break;
      length += read;
    }
    return { text: buffer.toString('utf8', 0, length) };
  } finally {
    closeSync(fd);
  }
}

/** Where a runtime records its sessions for a later start. */
export interface SessionRecorder {
  /** The cgroup of session cgroups: a later start kills and removes it whole. */
  setCgroup(directory: string): void;
  /** A session's processes, or undefined once nothing of it runs. */
  record(key: string, members: readonly ProcessIdentity[] | undefined): void;
}

/**
 * The record of one daemon. Writes are synchronous: they must be on disk
 * before the session runs on. The directory must be one only this uid may
 * write (see {@link journalDirectoryProblem}).
 */
export class SessionJournal implements SessionRecorder {
  readonly path: string;
  readonly #directory: string;
  readonly #content: JournalFile;
  #closed = false;

  /** @param self this process by identity; a journal is never written without one. */
  constructor(directory: string, self: ProcessIdentity) {
    this.#directory = directory;
    this.path = join(directory, journalName(self));
    this.#content = { daemon: self, sessions: {} };
  }

  /** Records the daemon's cgroup of session cgroups: the next daemon kills and removes it whole. */
  setCgroup(directory: string): void {
    this.#content.cgroup = directory;
    this.#write();
  }

  /** Records a session's processes, or forgets the session (undefined). */
  record(key: string, members: readonly ProcessIdentity[] | undefined): void {
    if (members === undefined) {
      if (!(key in this.#content.sessions)) return;
      delete this.#content.sessions[key];
    } else {
      this.#content.sessions[key] = members.map((member) => ({ pid: member.pid, started: member.started }));
    }
    this.#write();
  }

  /** Removes the file: nothing of this daemon is left to end. */
  close(): void {
    this.#closed = true;
    rmSync(this.path, { force: true });
  }

  #write(): void {
    if (this.#closed) return;
    mkdirSync(this.#directory, { recursive: true, mode: 0o700 });
    const temporary = `${this.path}.tmp`;
    // Never through a link: the file is this daemon's own, 0600.
    const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
    try {
      writeSync(fd, JSON.stringify(this.#content));
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, this.path);
  }
}

export interface RecoveryReport {
  /** Journals of dead daemons that were handled and removed. */
  readonly journals: string[];
  /** Cgroups killed and removed. */
  readonly cgroups: string[];
  /** Pids that were sent SIGKILL. */
  readonly killed: number[];
  /**
   * What was not acted on, and why: a journal directory or file that another
   * uid owns or others may write (left as it is), or an order in a record
   * that the daemon could not have given (a cgroup that is not its own, a
   * process of a uid no session could have run as), or one that failed.
   */
  readonly refused: { readonly path: string; readonly reason: string }[];
}

/** What a recovery may end: the uids sessions could have run as, and where daemons' cgroups are. */
export interface RecoveryScope {
  /** Only processes running as one of these uids are killed. @default this process's effective uid */
  readonly uids?: readonly number[];
  /**
   * The cgroup this process lives in: a daemon beside it made its cgroup of
   * session cgroups directly under it. Without it no recorded cgroup is
   * acted on.
   */
  readonly cgroupParent?: string | undefined;
}

export interface RecoveryOptions extends RecoveryScope {
  /** @default the Linux /proc inspector */
  readonly inspector?: ProcessInspector;
  /** This process, whose own journal is left alone. */
  readonly self?: ProcessIdentity;
  /** Only the record of this daemon is handled (the session watcher's). */
  readonly only?: ProcessIdentity;
  /** Test hook: the real uid of a process. @default read from /proc/<pid>/status */
  readonly uidOf?: (pid: number) => number | undefined;
}

/**
 * The scope of a daemon's recovery: its own uid and those of the users the
 * token file maps owners to, and the cgroup it lives in (its containment's,
 * or found from /proc when it uses none, so that a dead daemon of an earlier
 * configuration is still ended).
 */
export function recoveryScope(containment: Containment, sessionUids: readonly number[]): RecoveryScope {
  const own = process.geteuid?.();
  let cgroupParent = containment.recovery?.cgroupParent;
  if (cgroupParent === undefined) {
    try {
      cgroupParent = locateOwnCgroup();
    } catch (_error) {
      // No cgroup v2 here: no dead daemon can have made one beside this process.
    }
  }
  return { uids: [...new Set([...(own === undefined ? [] : [own]), ...sessionUids])], cgroupParent };
}

/** The real uid of `pid`, from its /proc status (`Uid:` real, effective, saved, filesystem). */
function procRealUid(pid: number): number | undefined {
  try {
    const match = /^Uid:\s+(\d+)/m.exec(readKernelText(`/proc/${pid}/status`));
    return match === null ? undefined : Number(match[1]);
  } catch (_error) {
    return undefined;
  }
}

/**
 * Ends what daemons that died left: for every journal in `directory` whose
 * daemon no longer runs (a live daemon sharing the directory is left alone),
 * kills and removes its cgroup, SIGKILLs its recorded processes that still run
 * with the same start time, together with their trees and the members of the
 * groups and sessions they lead, and removes the journal; each only as far as
 * the module's rules of trust allow. Never rejects: what cannot be done is
 * reported in `refused`.
 */
export async function recoverSessions(directory: string, options: RecoveryOptions = {}): Promise<RecoveryReport> {
  const report: RecoveryReport = { journals: [], cgroups: [], killed: [], refused: [] };
  const held = holdDirectory(directory);
  if (held === undefined) return report;
  if ('refused' in held) {
    report.refused.push({ path: directory, reason: held.refused });
    return report;
  }
  try {
    let names: string[];
    try {
      names = readdirSync(held.entry('.'));
    } catch (error) {
      report.refused.push({ path: directory, reason: `it cannot be listed (${errnoCode(error) ?? (error as Error).message})` });
      return report;
    }
    const inspector = options.inspector ?? new LinuxInspector();
    const only = options.only;
    if (only !== undefined) names = names.filter((name) => name === journalName(only));
    for (const name of names) await recoverOne(directory, held, name, inspector, options, report);
  } finally {
    closeSync(held.fd);
  }
  return report;
}

/** Handles the entry `name` of the journal directory. */
async function recoverOne(
  directory: string,
  held: HeldDirectory,
  name: string,
  inspector: ProcessInspector,
  options: RecoveryOptions,
  report: RecoveryReport,
): Promise<void> {
  const path = join(directory, name);
  const self = options.self;
  const isSelf = (daemon: ProcessIdentity): boolean => self !== undefined && daemon.pid === self.pid && daemon.started === self.started;
  if (name.endsWith('.json.tmp')) {
    // A write cut short by its daemon's death; its complete predecessor is beside it. A live daemon's is left to it.
    const writer = /^(\d+)-(.+)\.json\.tmp$/.exec(name);
    const daemon = writer === null ? undefined : { pid: Number(writer[1]), started: writer[2]! };
    if (daemon === undefined || (!isSelf(daemon) && !inspector.isAlive(daemon))) rmSync(held.entry(name), { force: true });
    return;
  }
  if (!name.endsWith('.json')) return;
  const read = readJournalFile(held.entry(name));
  if (read === undefined) return;
  if ('refused' in read) {
    report.refused.push({ path, reason: read.refused });
    return;
  }
  const journal = parseJournal(read.text);
  if (journal === undefined) {
    report.refused.push({ path, reason: 'it is not a session record; removed' });
    rmSync(held.entry(name), { force: true });
    return;
  }
  if (name !== journalName(journal.daemon)) {
    report.refused.push({ path, reason: `it records daemon ${journal.daemon.pid}, whose record is named ${journalName(journal.daemon)}` });
    return;
  }
  if (isSelf(journal.daemon) || inspector.isAlive(journal.daemon)) return;
  try {
    const cgroup = recordedCgroup(journal, options.cgroupParent);
    if (cgroup !== undefined && 'refused' in cgroup) report.refused.push({ path, reason: cgroup.refused });
    else if (cgroup !== undefined && (await killAndRemoveCgroup(cgroup.path, CGROUP_KILL_TIMEOUT_MS, cgroup.keepRoot))) report.cgroups.push(cgroup.path);
    const uids = new Set(options.uids ?? [process.geteuid?.() ?? 0]);
    const { killed, strangers } = killRecorded(Object.values(journal.sessions).flat(), inspector, uids, options.uidOf ?? procRealUid);
    report.killed.push(...killed);
    for (const [pid, uid] of strangers)
      report.refused.push({ path, reason: `pid ${pid} runs as uid ${uid}, which no session of its daemon could have run as` });
  } catch (error) {
    // Left for a later start to try again; the start goes on.
    report.refused.push({ path, reason: `ending what it records failed: ${(error as Error).message}` });
    return;
  }
  rmSync(held.entry(name), { force: true });
  report.journals.push(path);
}

/**
 * The cgroup a record names, if the daemon it records could have made it:
 * `execworld-<its pid>` directly under `parent`. A pid that now names another
 * running process makes it that process's; this process's own (a daemon in a
 * container that got its predecessor's pid) is emptied and kept.
 */
function recordedCgroup(journal: JournalFile, parent: string | undefined): { path: string; keepRoot: boolean } | { refused: string } | undefined {
  if (journal.cgroup === undefined) return undefined;
  if (parent === undefined) return { refused: `its cgroup ${journal.cgroup} is not acted on: this process is in no cgroup it could find a daemon's beside` };
  const expected = join(parent, daemonCgroupName(journal.daemon.pid));
  if (journal.cgroup !== expected) return { refused: `its cgroup ${journal.cgroup} is not ${expected}, the one its daemon would have made` };
  if (journal.daemon.pid === process.pid) return { path: expected, keepRoot: true };
  if (processRuns(journal.daemon.pid)) return { refused: `its cgroup ${expected} is named after pid ${journal.daemon.pid}, which another process has now` };
  return { path: expected, keepRoot: false };
}

/**
 * SIGKILLs the recorded processes that still run as one of `uids`, their
 * trees and what they lead, each only while it runs as one of `uids` and is
 * neither this process nor one of its ancestors; returns the pids signalled,
 * and the pids (with their uids) left alone for their uid.
 */
function killRecorded(
  recorded: readonly ProcessIdentity[],
  inspector: ProcessInspector,
  uids: ReadonlySet<number>,
  uidOf: (pid: number) => number | undefined,
): { killed: number[]; strangers: Map<number, number> } {
  const killed = new Set<number>();
  const strangers = new Map<number, number>();
  for (let round = 0; round < KILL_ROUNDS; round += 1) {
    const index = new ProcessIndex(inspector.snapshot());
    const spared = new Set<number>();
    for (let pid: number | undefined = process.pid; pid !== undefined && pid > 0 && !spared.has(pid); pid = index.get(pid)?.ppid) spared.add(pid);
    // A process of another uid is no session's, and neither is what it started or leads.
    const mayKill = (pid: number): boolean => {
      if (spared.has(pid) || strangers.has(pid)) return false;
      const uid = uidOf(pid);
      if (uid !== undefined && !uids.has(uid)) strangers.set(pid, uid);
      return uid !== undefined && uids.has(uid);
    };
    const leaders = recorded.filter((identity) => index.get(identity.pid)?.alive === true && index.has(identity) && mayKill(identity.pid));
    const targets = new Map<number, ProcessIdentity>();
    for (const leader of leaders) {
      for (const row of index.tree(leader)) if (row.alive) targets.set(row.identity.pid, row.identity);
      const start = Number(leader.started);
      for (const row of index.rows) {
        const led = row.pgrp === leader.pid || row.session === leader.pid;
        if (led && row.alive && !(row.startTicks !== undefined && row.startTicks < start)) targets.set(row.identity.pid, row.identity);
      }
    }
    let signalled = 0;
    for (const target of targets.values()) {
      if (!mayKill(target.pid)) continue;
      if (inspector.signalProcess(target, 'SIGKILL')) {
        killed.add(target.pid);
        signalled += 1;
      }
    }
    if (signalled === 0) break;
  }
  return { killed: [...killed], strangers };
}
