/**
 * A daemon that dies (SIGKILL) takes its sessions with it: its session
 * watcher ends them, with no other daemon started; a daemon that stops
 * cleanly takes its watcher with it.
 */
import { mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { callDaemon, leaveSessions, type DaemonProcess } from '../helpers/daemon-process.ts';
import { daemonProcessTest, type SpawnDaemon } from '../helpers/daemon-test.ts';
import { killMarked, markerPids, uniqueSleepMarker } from '../helpers/proc.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const test = daemonProcessTest();

// What a failed test may leave; its daemons are stopped after this, when the test ends.
const markers: string[] = [];
const watchers: number[] = [];
afterEach(() => {
  for (const marker of markers.splice(0)) killMarked(marker);
  for (const pid of watchers.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (_error) {
      // Gone, as it should be.
    }
  }
});

/** A field of /proc/<pid>/status or smaps_rollup, in KiB. */
function kib(pid: number, file: 'status' | 'smaps_rollup', field: string): number {
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/${file}`, 'latin1'))![1]);
}

/** The descriptors of `pid` and what they are, but those that name no one object (epoll, eventfd, /dev/null). */
function descriptors(pid: number): [number, string][] {
  const found: [number, string][] = [];
  for (const name of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${name}`);
      if (!target.startsWith('anon_inode:') && target !== '/dev/null') found.push([Number(name), target]);
    } catch (_error) {
      // Closed meanwhile.
    }
  }
  return found;
}

/** The 0:: line of /proc/<pid>/cgroup: the process's cgroup v2. */
function cgroupOf(pid: number): string {
  return /^0::(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'latin1'))?.[1] ?? '';
}

/** A daemon with its session watcher, on a state directory of its own. */
async function daemonWithWatcher(spawnDaemon: SpawnDaemon, mode: 'auto' | 'subreaper'): Promise<{ daemon: DaemonProcess; watcher: number; stateDir: string }> {
  const stateDir = mkdtempSync(join(tmpdir(), 'execworld-death-'));
  const daemon = await spawnDaemon(['--state-dir', stateDir, ...(mode === 'auto' ? [] : ['--containment', mode])]);
  const watcher = daemon.watcherPid();
  expect(watcher, 'the daemon names its watcher in its log').toBeDefined();
  watchers.push(watcher!);
  expect(pidAlive(watcher!)).toBe(true);
  return { daemon, watcher: watcher!, stateDir };
}

describe('a daemon that dies', () => {
  for (const mode of ['auto', 'subreaper'] as const) {
    test(`leaves nothing of its sessions running, with no other daemon started (containment ${mode})`, async ({ spawnDaemon }) => {
      const marker = uniqueSleepMarker();
      markers.push(marker);
      const { daemon, watcher, stateDir } = await daemonWithWatcher(spawnDaemon, mode);
      // Beside the daemon, in its cgroup, not in any session's; a session of its own, not the daemon's.
      expect(cgroupOf(watcher)).toBe(cgroupOf(daemon.pid));
      const [, , , sessionOfWatcher] = readFileSync(`/proc/${watcher}/stat`, 'latin1').split(') ')[1]!.split(' ');
      expect(Number(sessionOfWatcher)).toBe(watcher);

      await leaveSessions(daemon, marker);
      // It holds nothing of the daemon's but fds 0-2: no session's pipe or terminal, no socket, nothing inherited.
      const daemonHolds = new Set(descriptors(daemon.pid).map(([, target]) => target));
      expect(descriptors(watcher).filter(([fd, target]) => fd > 2 && daemonHolds.has(target))).toEqual([]);
      // What the watcher costs, with sessions running.
      const figures = {
        mode,
        watcherRssKiB: kib(watcher, 'status', 'VmRSS'),
        watcherRssAnonKiB: kib(watcher, 'status', 'RssAnon'),
        watcherPssKiB: kib(watcher, 'smaps_rollup', 'Pss'),
        daemonRssKiB: daemon.rssKiB(),
      };
      console.log(`session watcher: ${JSON.stringify(figures)}`);

      const killedAt = Date.now();
      process.kill(daemon.pid, 'SIGKILL');
      await waitFor('every session process to end', () => markerPids(marker).length === 0, 30_000);
      console.log(`session watcher (${mode}): the sessions ended ${Date.now() - killedAt} ms after the daemon was killed`);
      await waitFor('the watcher to exit', () => !pidAlive(watcher), 30_000);
      // It removed the dead daemon's record: nothing is left for a later start.
      expect(readdirSync(join(stateDir, 'sessions'))).toEqual([]);
    });
  }

  test('that stops cleanly takes its watcher with it, which ends nothing', async ({ spawnDaemon }) => {
    const marker = uniqueSleepMarker();
    markers.push(marker);
    const { daemon, watcher, stateDir } = await daemonWithWatcher(spawnDaemon, 'auto');
    await callDaemon(daemon, 'POST', '/v1/processes', {
      argv: ['/bin/sh', '-c', `sleep ${marker}`],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
      graceMs: 1000,
    });
    expect(await daemon.stop()).toBe(0);
    await waitFor('the watcher to exit', () => !pidAlive(watcher), 30_000);
    expect(readdirSync(join(stateDir, 'sessions'))).toEqual([]);
  });
});
