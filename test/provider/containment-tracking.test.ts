/**
 * The subreaper fallback in a host that also starts children of its own: no
 * orphan is claimed on suspicion, and a session keeps what it was seen to
 * start, also after that was reparented to this process.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import { killMarked, markerPids, uniqueSleepMarker } from '../helpers/proc.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const runtime = new LocalRuntime({ containment: 'subreaper' });
afterAll(() => runtime.dispose());

const markers: string[] = [];
afterEach(() => {
  for (const marker of markers.splice(0)) killMarked(marker);
});

function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

describe('subreaper containment without claiming orphans', () => {
  it('keeps a process seen in the tree after it is reparented here, until terminate ends it', async () => {
    const m = uniqueSleepMarker();
    markers.push(m);
    // The middle shell leaves the group and the session and waits: its sleep is in the tree, seen by the scans.
    const handle = runtime.spawn({
      argv: ['/bin/sh', '-c', `setsid sh -c 'sleep ${m} & wait' & wait`],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
      graceMs: 500,
    });
    await waitFor('the sleep', () => markerPids(m).length === 1);
    const [sleeper] = markerPids(m) as [number];
    const middle = parentOf(sleeper);
    // While someone waits, the cell is rescanned: the sleep is tracked from now on.
    await expect(handle.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
    process.kill(middle, 'SIGKILL');
    process.kill(handle.pid, 'SIGKILL');
    await handle.done;
    await waitFor('the sleep to be reparented here', () => parentOf(sleeper) === process.pid);
    await expect(handle.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
    handle.terminate();
    await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
    expect(pidAlive(sleeper)).toBe(false);
  });
});
