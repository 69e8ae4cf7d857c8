/**
 * Identity fencing and cleanup failures of terminals, with real ptys and an
 * inspector that can be made to show what a real system cannot be made to
 * show on purpose: a recycled pid, a process that will not die.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import type { ProcessIdentity, ProcessInspector, ProcessRow } from '../../service/src/provider/inspect/inspector.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { bystanders } from '../helpers/proc.ts';
import { openBash } from '../helpers/terminal.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

/** The real inspector, with hooks to add rows, lie about liveness and record signals. */
class ScriptedInspector extends LinuxInspector implements ProcessInspector {
  extraRows: ProcessRow[] = [];
  hideIdentity = false;
  immortal = new Set<string>();
  ignoreSignals = new Set<number>();
  readonly signals: [pid: number, signal: string][] = [];

  override identity(pid: number): ProcessIdentity | undefined {
    return this.hideIdentity ? undefined : super.identity(pid);
  }
  override snapshot(): ProcessRow[] {
    const extra = new Set(this.extraRows.map((row) => row.identity.pid));
    return [...super.snapshot().filter((row) => !extra.has(row.identity.pid)), ...this.extraRows];
  }
  /** A cgroup cell's rows: the added rows count as processes of the cell. */
  override snapshotOf(pids: readonly number[]): ProcessRow[] {
    const extra = new Set(this.extraRows.map((row) => row.identity.pid));
    return [...super.snapshotOf(pids).filter((row) => !extra.has(row.identity.pid)), ...this.extraRows];
  }
  override isAlive(identity: ProcessIdentity): boolean {
    return this.immortal.has(`${identity.pid}:${identity.started}`) || super.isAlive(identity);
  }
  override signalProcess(identity: ProcessIdentity, signal: NodeJS.Signals): boolean {
    this.signals.push([identity.pid, signal]);
    if (this.ignoreSignals.has(identity.pid) || this.immortal.has(`${identity.pid}:${identity.started}`)) return true;
    return super.signalProcess(identity, signal);
  }
}

const row = (pid: number, ppid: number, session: number, started: string, startTicks: number): ProcessRow => ({
  identity: { pid, started },
  ppid,
  pgrp: pid,
  session,
  alive: true,
  startTicks,
});

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const outsiders = bystanders(afterEach);
/** A real process outside every session, to see whether anything signals it. */
const bystander = (): number => outsiders.start();

describe('terminal fencing', () => {
  it('never adopts the children of a process that reused the shell pid', async () => {
    const inspector = new ScriptedInspector();
    const runtime = new LocalRuntime({ inspector });
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/sh', '-c', 'exit 0'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 200 });
    await terminal.done;
    const other = bystander();
    // The shell's pid now names another process, with a child and a session of the same id.
    const far = Number.MAX_SAFE_INTEGER;
    inspector.extraRows = [
      row(terminal.pid, 1, terminal.pid, 'recycled', far),
      row(other, terminal.pid, terminal.pid, inspector.identity(other)!.started, far),
    ];
    await terminal.terminate();
    expect(inspector.signals.filter(([pid]) => pid === other || pid === terminal.pid)).toEqual([]);
    expect(pidAlive(other)).toBe(true);
    await runtime.dispose();
  });

  it('adopts nothing when the shell identity was never readable, and stops the shell through its pty', async () => {
    const inspector = new ScriptedInspector();
    inspector.hideIdentity = true;
    const runtime = new LocalRuntime({ inspector });
    const shell = await openBash(runtime, { graceMs: 500 });
    const job = Number(/job=(\d+)/.exec(await shell.run('sleep 300 & echo "job=$!"'))?.[1]);
    cleanups.push(() => process.kill(job, 'SIGKILL'));
    await shell.terminal.terminate();
    expect(['SIGHUP', 'SIGTERM']).toContain((await shell.terminal.done).signal);
    expect(inspector.signals).toEqual([]);
    await runtime.dispose();
  });

  it('sends SIGKILL to a child forked during the TERM phase', async () => {
    const inspector = new ScriptedInspector();
    const runtime = new LocalRuntime({ inspector });
    const shell = await openBash(runtime, { graceMs: 1000 });
    const output = await shell.run(`sh -c 'trap "sleep 300 & echo late=\\$! > /tmp/ew-late-$$; exit" TERM; while :; do sleep 0.05; done' & echo "first=$!"`);
    const first = Number(/first=(\d+)/.exec(output)?.[1]);
    await waitFor('the trap to be set', () => spawnSync('pgrep', ['-P', String(first)]).status === 0);
    await shell.terminal.terminate();
    const late = Number(/late=(\d+)/.exec(spawnSync('cat', [`/tmp/ew-late-${first}`], { encoding: 'utf8' }).stdout)?.[1]);
    expect(late).toBeGreaterThan(0);
    expect(pidAlive(late)).toBe(false);
    expect(inspector.signals).toContainEqual([first, 'SIGTERM']);
    expect(inspector.signals).toContainEqual([late, 'SIGKILL']);
    expect(inspector.signals).not.toContainEqual([late, 'SIGTERM']);
    await runtime.dispose();
  });

  it('reports survivors, leaves the shell alone while they live, and succeeds on a retry once they are gone', async () => {
    const inspector = new ScriptedInspector();
    const runtime = new LocalRuntime({ inspector });
    const shell = await openBash(runtime, { graceMs: 100 });
    const immortal = row(999_999, shell.terminal.pid, shell.terminal.pid, 'immortal', 1);
    inspector.extraRows = [immortal];
    inspector.immortal.add('999999:immortal');
    const first = shell.terminal.terminate();
    await expect(first).rejects.toMatchObject({ code: 'CLEANUP_FAILED', message: 'terminal cleanup failed; surviving pids: 999999' });
    expect(inspector.signals.filter(([pid]) => pid === shell.terminal.pid)).toEqual([]);
    expect(pidAlive(shell.terminal.pid)).toBe(true);
    inspector.immortal.clear();
    inspector.extraRows = [];
    const second = shell.terminal.terminate();
    expect(second).not.toBe(first);
    await expect(second).resolves.toBeUndefined();
    expect(pidAlive(shell.terminal.pid)).toBe(false);
    await runtime.dispose();
  });

  it('reports a shell that survives both TERM and KILL', async () => {
    const inspector = new ScriptedInspector();
    const runtime = new LocalRuntime({ inspector });
    const shell = await openBash(runtime, { graceMs: 100 });
    inspector.ignoreSignals.add(shell.terminal.pid);
    await expect(shell.terminal.terminate()).rejects.toThrow(`terminal cleanup failed; surviving pid: ${shell.terminal.pid}`);
    inspector.ignoreSignals.clear();
    await shell.terminal.terminate();
    await runtime.dispose();
  });

  it('reports every failed terminal of a disposal in one AggregateError', async () => {
    const inspector = new ScriptedInspector();
    const runtime = new LocalRuntime({ inspector });
    const a = await openBash(runtime, { graceMs: 100 });
    const b = await openBash(runtime, { graceMs: 100 });
    inspector.ignoreSignals.add(a.terminal.pid);
    inspector.ignoreSignals.add(b.terminal.pid);
    const disposal = runtime.dispose();
    await expect(disposal).rejects.toThrow(AggregateError);
    await expect(disposal).rejects.toThrow('local subprocess teardown failed');
    await disposal.catch((error: AggregateError) => expect(error.errors).toHaveLength(2));
    // The last-resort kill went through the same deaf inspector; end the shells here.
    inspector.ignoreSignals.clear();
    await Promise.all([a.terminal.terminate(), b.terminal.terminate()]);
    expect(pidAlive(a.terminal.pid) || pidAlive(b.terminal.pid)).toBe(false);
  });
});

describe('host exit', () => {
  it('kills every owned tree and terminal session when the host process exits', async () => {
    const script = fileURLToPath(new URL('../fixtures/exit-with-children.ts', import.meta.url));
    const child = spawnSync(process.execPath, ['--import', 'tsx', script], { encoding: 'utf8', timeout: 20_000 });
    expect(child.status).toBe(7);
    const pids = child.stdout.trim().split(/\s+/).map(Number);
    expect(pids.length).toBe(4);
    await waitFor('every child gone', () => pids.every((pid) => !pidAlive(pid)));
  });
});
