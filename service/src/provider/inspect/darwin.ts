/**
 * The macOS inspector, built on `ps`. macOS has no `/proc`: there is no proof
 * of an input wait, no session listing, zombies are not told apart, and start
 * times have one-second resolution, so a pid reused within the same second is
 * not fenced. Every call runs `ps`.
 * @module
 */
import { execFileSync } from 'node:child_process';
import type { InputWait, ProcessIdentity, ProcessInspector, ProcessRow, TerminalDevice } from './inspector.ts';
import { trySignal } from './inspector.ts';

/** Runs a program and returns its stdout, or undefined when it fails. */
export type CommandRunner = (file: string, args: readonly string[]) => string | undefined;

const runPs: CommandRunner = (file, args) => {
  try {
    return execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 });
  } catch (_error) {
    return undefined;
  }
};

/** The `ps` columns read: pid, ppid, pgid, state, start time (lstart, last as it has spaces). */
export const PS_TABLE_ARGS = ['-axo', 'pid=,ppid=,pgid=,stat=,lstart='] as const;

/** Parses `ps` output in {@link PS_TABLE_ARGS} form; malformed lines are skipped. */
export function parsePsTable(text: string): ProcessRow[] {
  const rows: ProcessRow[] = [];
  for (const line of text.split('\n')) {
    const match = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.+?)\s*$/.exec(line);
    if (match === null) continue;
    const pid = Number(match[1]);
    rows.push({
      identity: { pid, started: match[5] ?? '' },
      ppid: Number(match[2]),
      pgrp: Number(match[3]),
      session: undefined,
      alive: !(match[4] ?? '').startsWith('Z'),
      startTicks: undefined,
    });
  }
  return rows;
}

export class DarwinInspector implements ProcessInspector {
  readonly platform = 'darwin' as const;
  readonly exactInputWait = false;
  readonly #run: CommandRunner;

  constructor(run: CommandRunner = runPs) {
    this.#run = run;
  }

  snapshotOf(pids: readonly number[]): ProcessRow[] {
    // The table is read in one call here: the rows of `pids` are filtered from it.
    const wanted = new Set(pids);
    return this.snapshot().filter((row) => wanted.has(row.identity.pid));
  }

  snapshot(): ProcessRow[] {
    return parsePsTable(this.#run('/bin/ps', PS_TABLE_ARGS) ?? '');
  }

  nowTicks(): number | undefined {
    return undefined;
  }

  #row(pid: number): ProcessRow | undefined {
    return this.snapshot().find((row) => row.identity.pid === pid);
  }

  foregroundGroup(shellPid: number): number | undefined {
    const text = this.#run('/bin/ps', ['-o', 'tpgid=', '-p', String(shellPid)])?.trim();
    const value = text === undefined || !/^\d+$/.test(text) ? Number.NaN : Number(text);
    return Number.isSafeInteger(value) && value > 0 ? value : undefined;
  }

  terminalDevice(path: string): TerminalDevice {
    return { path };
  }

  inputWait(): InputWait | undefined {
    return undefined;
  }

  identity(pid: number): ProcessIdentity | undefined {
    const row = this.#row(pid);
    return row?.alive === true ? row.identity : undefined;
  }

  isAlive(identity: ProcessIdentity): boolean {
    const row = this.#row(identity.pid);
    return row?.alive === true && row.identity.started === identity.started;
  }

  groupHasLiveMembers(pgid: number): boolean | undefined {
    const members = this.snapshot().filter((row) => row.pgrp === pgid);
    return members.length === 0 ? undefined : members.some((row) => row.alive);
  }

  signalGroup(pgid: number, signal: NodeJS.Signals): void {
    process.kill(-pgid, signal);
  }

  signalProcess(identity: ProcessIdentity, signal: NodeJS.Signals): boolean {
    return this.isAlive(identity) && trySignal(identity.pid, signal);
  }
}
