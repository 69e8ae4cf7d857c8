/**
 * A daemon that dies without cleaning up (SIGKILL) together with its session
 * watcher leaves its sessions running; the next daemon on the same state
 * directory ends them at start.
 */
import { mkdirSync, mkdtempSync, readdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { callDaemon, leaveSessions } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { killMarked, markerPids, uniqueSleepMarker } from '../helpers/proc.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const test = daemonProcessTest();

// What a failed test may leave; its daemons are stopped after this, when the test ends.
const markers: string[] = [];
afterEach(() => {
  for (const marker of markers.splice(0)) killMarked(marker);
});

describe('restart after a daemon and its watcher were SIGKILLed', () => {
  for (const mode of ['auto', 'subreaper'] as const) {
    test(`ends the sessions the dead daemon left (containment ${mode})`, async ({ spawnDaemon }) => {
      const marker = uniqueSleepMarker();
      markers.push(marker);
      const stateDir = mkdtempSync(join(tmpdir(), 'execworld-restart-'));
      const args = ['--state-dir', stateDir, ...(mode === 'auto' ? [] : ['--containment', mode])];
      const first = await spawnDaemon(args);
      await leaveSessions(first, marker);
      // Its watcher dies first, so that only the next start can end what the daemon leaves.
      const watcher = first.watcherPid()!;
      process.kill(watcher, 'SIGKILL');
      await waitFor('the watcher to die', () => !pidAlive(watcher));
      process.kill(first.pid, 'SIGKILL');
      await waitFor('the daemon to die', () => !pidAlive(first.pid));
      expect(markerPids(marker)).toHaveLength(3);

      // The next daemon on the same state directory: its start is what ends them.
      await spawnDaemon(args);
      await waitFor('the left sessions to end', () => markerPids(marker).length === 0, 20_000);
    });
  }
});

describe('upload stages a SIGKILLed daemon left', () => {
  test('are removed by the next daemon, and only where their names still lead to them', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-restart-'));
    const place = mkdtempSync(join(tmpdir(), 'execworld-stages-'));
    const first = await spawnDaemon(['--state-dir', stateDir]);
    /** An upload into `directory` with a few bytes sent, left open. */
    const begin = async (directory: string): Promise<void> => {
      mkdirSync(directory, { recursive: true });
      const upload = await callDaemon(first, 'POST', '/v1/files/uploads', { path: join(directory, 'file.bin') });
      const put = await fetch(`${first.url}/v1/files/uploads/${upload.id}?offset=0`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${first.token}`, 'content-type': 'application/octet-stream' },
        body: 'partial bytes',
      });
      expect(put.status).toBe(200);
    };
    await begin(join(place, 'kept-name'));
    await begin(join(place, 'swapped'));
    const stageIn = (directory: string): string[] => readdirSync(directory).filter((name) => name.startsWith('.execworld-upload-'));
    expect(stageIn(join(place, 'kept-name'))).toHaveLength(1);
    process.kill(first.pid, 'SIGKILL');
    await waitFor('the daemon to die', () => !pidAlive(first.pid));
    // Where the daemon could not clean up, somebody moved one stage away and put a link to other files at its name.
    const swapped = join(place, 'swapped', stageIn(join(place, 'swapped'))[0]!);
    renameSync(swapped, join(place, 'moved-stage'));
    const victim = join(place, 'victim');
    mkdirSync(victim);
    writeFileSync(join(victim, 'content'), 'not the stage');
    symlinkSync(victim, swapped);

    // The next daemon on the same state directory: its start removes the stages it may.
    await spawnDaemon(['--state-dir', stateDir]);
    expect(stageIn(join(place, 'kept-name'))).toEqual([]);
    expect(readdirSync(victim)).toEqual(['content']);
    expect(stageIn(join(place, 'swapped'))).toHaveLength(1);
    expect(readdirSync(join(place, 'moved-stage'))).toEqual(['content']);
    // Its records were read once: nothing of the first daemon is left for a third.
    expect(readdirSync(join(stateDir, 'stages'))).toEqual([]);
  });
});
