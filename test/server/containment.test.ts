/**
 * The daemon reports how it contains sessions, and a start ends only what
 * dead daemons recorded: never a live daemon's sessions, never a pid that now
 * names another process.
 */
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { hostCgroupContainment } from '../../service/src/provider/containment/cgroup.ts';
import { recoverSessions, SessionJournal } from '../../service/src/provider/containment/journal.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { bystanders } from '../helpers/proc.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

/** Whether this host lets this process make and enter a cgroup. */
function cgroupsHere(): boolean {
  try {
    hostCgroupContainment();
    return true;
  } catch (_error) {
    return false;
  }
}

const test = daemonTest();
const sleepers = bystanders(afterEach);
/** A real process outside every session, to see whether anything signals it. */
const sleeper = (): number => sleepers.start();

describe('health: containment', () => {
  test.skipIf(!cgroupsHere())('is cgroup by default where a cgroup can be made', async ({ startDaemon }) => {
    const daemon = await startDaemon();
    expect((await daemon.request('GET', '/v1/health')).body.capabilities.containment).toBe('cgroup');
  });

  for (const mode of ['subreaper', 'none'] as const) {
    test(`is ${mode} when the daemon is told so`, async ({ spawnDaemon }) => {
      const daemon = await spawnDaemon(['--containment', mode]);
      const health = (await (await fetch(`${daemon.url}/v1/health`)).json()) as { capabilities: { containment: string } };
      expect(health.capabilities.containment).toBe(mode);
    });
  }
});

describe('recovery from the state directory', () => {
  const inspector = new LinuxInspector();

  test("ends a dead daemon's recorded processes, fenced on their start time, and leaves a live daemon's alone", async () => {
    const directory = mkdtempSync(join(tmpdir(), 'execworld-journal-'));
    const [recorded, recycled, livesDaemon] = [sleeper(), sleeper(), sleeper()];
    const identity = (pid: number) => inspector.identity(pid)!;
    // A daemon that died (its identity names no process now) recorded two processes;
    // the second pid now names a process that started at another time.
    const dead = new SessionJournal(directory, { pid: identity(recorded).pid, started: 'long-ago' });
    dead.record('s-1', [identity(recorded), { pid: recycled, started: '1' }]);
    // A daemon that runs (here: a sleep standing in for it) recorded the third.
    const live = new SessionJournal(directory, identity(livesDaemon));
    live.record('s-1', [identity(livesDaemon)]);
    writeFileSync(join(directory, 'torn.json.tmp'), '{"daemon":');

    const report = await recoverSessions(directory, { inspector });
    expect(report.killed).toEqual([recorded]);
    expect(report.journals).toEqual([dead.path]);
    await waitFor('the recorded process to end', () => !pidAlive(recorded));
    expect(pidAlive(recycled)).toBe(true);
    expect(pidAlive(livesDaemon)).toBe(true);
    expect(readdirSync(directory)).toEqual([live.path.slice(directory.length + 1)]);
  });
});
