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
 * @module
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ProcessIndex, type ProcessIdentity, type ProcessInspector } from '../inspect/inspector.ts';
import { LinuxInspector } from '../inspect/linux.ts';
import { killAndRemoveCgroup } from './cgroup-fs.ts';

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

/** Where a runtime records its sessions for a later start. */
export interface SessionRecorder {
  /** The cgroup of session cgroups: a later start kills and removes it whole. */
  setCgroup(directory: string): void;
  /** A session's processes, or undefined once nothing of it runs. */
  record(key: string, members: readonly ProcessIdentity[] | undefined): void;
}

/** The record of one daemon. Writes are synchronous: they must be on disk before the session runs on. */
export class SessionJournal implements SessionRecorder {
  readonly path: string;
  readonly #directory: string;
  readonly #content: JournalFile;
  #closed = false;

  /** @param self this process by identity; a journal is never written without one. */
  constructor(directory: string, self: ProcessIdentity) {
    this.#directory = directory;
    this.path = join(directory, `${self.pid}-${self.started}.json`);
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
    writeFileSync(temporary, JSON.stringify(this.#content), { mode: 0o600 });
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
}

export interface RecoveryOptions {
  /** @default the Linux /proc inspector */
  readonly inspector?: ProcessInspector;
  /** This process, whose own journal is left alone. */
  readonly self?: ProcessIdentity;
}

/**
 * Ends what daemons that died left: for every journal in `directory` whose
 * daemon no longer runs (a live daemon sharing the directory is left alone),
 * kills and removes its cgroup, SIGKILLs its recorded processes that still run
 * with the same start time, together with their trees and the members of the
 * groups and sessions they lead, and removes the journal.
 */
export async function recoverSessions(directory: string, options: RecoveryOptions = {}): Promise<RecoveryReport> {
  const report: RecoveryReport = { journals: [], cgroups: [], killed: [] };
  let names: string[];
  try {
    names = readdirSync(directory);
  } catch (_error) {
    return report;
  }
  const inspector = options.inspector ?? new LinuxInspector();
  for (const name of names) {
    const path = join(directory, name);
    if (name.endsWith('.json.tmp')) {
      // A write cut short; its complete predecessor is beside it.
      rmSync(path, { force: true });
      continue;
    }
    if (!name.endsWith('.json')) continue;
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (_error) {
      continue;
    }
    const journal = parseJournal(text);
    if (journal === undefined) {
      rmSync(path, { force: true });
      continue;
    }
    const self = options.self;
    if (self !== undefined && journal.daemon.pid === self.pid && journal.daemon.started === self.started) continue;
    if (inspector.isAlive(journal.daemon)) continue;
    if (journal.cgroup !== undefined && (await killAndRemoveCgroup(journal.cgroup, CGROUP_KILL_TIMEOUT_MS))) report.cgroups.push(journal.cgroup);
    report.killed.push(...killRecorded(Object.values(journal.sessions).flat(), inspector));
    rmSync(path, { force: true });
    report.journals.push(path);
  }
  return report;
}

/** SIGKILLs the recorded processes that still run, their trees and what they lead; returns the pids signalled. */
function killRecorded(recorded: readonly ProcessIdentity[], inspector: ProcessInspector): number[] {
  const killed = new Set<number>();
  for (let round = 0; round < KILL_ROUNDS; round += 1) {
    const index = new ProcessIndex(inspector.snapshot());
    const leaders = recorded.filter((identity) => index.get(identity.pid)?.alive === true && index.has(identity));
    const targets = new Map<number, ProcessIdentity>();
    for (const leader of leaders) {
      for (const row of index.tree(leader)) if (row.alive) targets.set(row.identity.pid, row.identity);
      const start = Number(leader.started);
      for (const row of index.rows) {
        const led = row.pgrp === leader.pid || row.session === leader.pid;
        if (led && row.alive && !(row.startTicks !== undefined && row.startTicks < start)) targets.set(row.identity.pid, row.identity);
      }
    }
    if (targets.size === 0) break;
    for (const target of targets.values()) if (inspector.signalProcess(target, 'SIGKILL')) killed.add(target.pid);
  }
  return [...killed];
}
