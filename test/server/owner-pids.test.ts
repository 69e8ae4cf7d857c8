/**
 * One owner's runaway program does not take the world's pids: with the
 * daemon's default settings a session is held to the default pids limit
 * (4096), all the sessions of one owner together to the owner's total
 * (--max-owner-pids) by a cgroup of the owner's above theirs, and another
 * owner's commands run on meanwhile. The owner's cgroup goes with its last
 * session, and those a killed daemon left are swept by the next start.
 *
 * This host's pids controller is cgroup v1 (`/sys/fs/cgroup/pids`), beside a
 * v2 tree without controllers (`/sys/fs/cgroup/unified`) that holds the
 * sessions: the owner's cgroup is made in both. The v2 controller's files
 * are checked on a directory tree in test/provider/limits-v2.test.ts.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect } from 'vitest';
import { BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { callDaemon } from '../helpers/daemon-process.ts';
import { requestTakeover } from '../helpers/takeover.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonTest();

const scratch = mkdtempSync(join(tmpdir(), 'execworld-owner-pids-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The v1 pids cgroup of `pid`, on disk. */
function pidsCgroupOf(pid: number): string {
  const path = /^\d+:pids:(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'latin1'))![1]!;
  return join('/sys/fs/cgroup/pids', path);
}

/** The v2 cgroup of `pid`, on disk. */
function unifiedCgroupOf(pid: number): string {
  return join('/sys/fs/cgroup/unified', /^0::(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'latin1'))![1]!);
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'latin1').trim();
  } catch (_error) {
    return '';
  }
}

const count = (path: string): number => Number(readText(path) || '0');

/**
 * A thread bomb that never gives up: it starts threads that sleep for ever,
 * and after each refused one tries again a moment later.
 */
const THREAD_BOMB = `
import threading, time
while True:
    try:
        threading.Thread(target=time.sleep, args=(1e9,), daemon=True).start()
    except RuntimeError:
        time.sleep(0.01)
`;

/** Holds up to `pids` pids (itself and threads), writes how many threads it started to `file`, and sleeps. */
const holder = (pids: number, file: string): string => `
import threading, time
started = 0
for _ in range(${pids - 1}):
    try:
        threading.Thread(target=time.sleep, args=(1e9,), daemon=True).start()
        started += 1
    except RuntimeError:
        break
open(${JSON.stringify(file)}, 'w').write(str(started))
time.sleep(1e9)
`;

/** Runs `true` as bob `times` times, answering how many exited 0. */
async function bobRuns(daemon: TestDaemon, times: number): Promise<number> {
  let ok = 0;
  for (let i = 0; i < times; i += 1) {
    const run = await daemon.request('POST', '/v1/run', { token: BOB, body: { argv: ['true'], cwd: '/tmp' } });
    if (run.status === 200 && run.body.exitCode === 0) ok += 1;
    else console.log('bob run failed', run.status, JSON.stringify(run.body).slice(0, 300));
  }
  return ok;
}

describe("an owner's pids", () => {
  test("with the default settings a session gets the default pids limit, in its owner's cgroup, and a thread bomb stops there while another owner runs", async ({
    daemon,
  }) => {
    // Checked on a quiet session first: where no default held, the bomb below would take the host's pids.
    const probe = await daemon.request('POST', '/v1/processes', { body: { argv: ['sleep', '600'], cwd: '/tmp' } });
    expect(probe.status).toBe(201);
    try {
      expect(probe.body.limits).toEqual({ pids: 4096 });
      const cell = pidsCgroupOf(probe.body.pid);
      expect(readText(join(cell, 'pids.max'))).toBe('4096');
      // <daemon's>/<owner's>/<session's>, in the pids hierarchy and in the v2 tree alike.
      expect(basename(dirname(cell))).toMatch(/^o-[0-9a-f]{32}$/);
      expect(basename(dirname(dirname(cell)))).toMatch(/^execworld-\d+$/);
      expect(basename(dirname(unifiedCgroupOf(probe.body.pid)))).toBe(basename(dirname(cell)));
      expect(count(join(dirname(cell), 'pids.max'))).toBeGreaterThan(4096);
    } finally {
      await daemon.request('DELETE', `/v1/processes/${probe.body.id}`);
    }

    const bomb = await daemon.request('POST', '/v1/processes', { body: { argv: ['python3', '-c', THREAD_BOMB], cwd: '/tmp' } });
    expect(bomb.status).toBe(201);
    try {
      const cell = pidsCgroupOf(bomb.body.pid);
      await waitFor(
        'the bomb to reach its limit',
        () => count(join(cell, 'pids.current')) >= 4096 && /^max [1-9]/m.test(readText(join(cell, 'pids.events'))),
        180_000,
      );
      const ok = await bobRuns(daemon, 20);
      const held = count(join(cell, 'pids.current'));
      console.log(`thread bomb held at ${held} pids (pids.events: ${readText(join(cell, 'pids.events'))}); bob's true: ${ok} of 20`);
      expect(ok).toBe(20);
      expect(held).toBeLessThanOrEqual(4096);
      const info = await daemon.request('GET', `/v1/processes/${bomb.body.id}`);
      expect(info.body).toMatchObject({ status: 'running', limits: { pids: 4096 }, usage: { limitHit: 'pids' } });
    } finally {
      await daemon.request('DELETE', `/v1/processes/${bomb.body.id}`);
    }
  });

  test("an owner's sessions together stay within --max-owner-pids, a create past it answers 429, another owner runs on, and the owner's cgroup goes with its last session", async ({
    startDaemon,
  }) => {
    const daemon = await startDaemon({ maxOwnerPids: 40 });
    const files = [join(scratch, 'first'), join(scratch, 'second')];
    const ids: string[] = [];
    try {
      const pids: number[] = [];
      for (const file of files) {
        const created = await daemon.request('POST', '/v1/processes', { body: { argv: ['python3', '-c', holder(30, file)], cwd: '/tmp' } });
        expect(created.status).toBe(201);
        ids.push(created.body.id);
        pids.push(created.body.pid);
        await waitFor(`${basename(file)} to hold its threads`, () => existsSync(file) && readText(file) !== '', 60_000);
      }
      const owner = dirname(pidsCgroupOf(pids[0]!));
      const ownerV2 = dirname(unifiedCgroupOf(pids[0]!));
      expect(dirname(pidsCgroupOf(pids[1]!))).toBe(owner);
      const started = files.map((file) => Number(readText(file)));
      const held = count(join(owner, 'pids.current'));
      console.log(`owner total 40: threads started ${started.join(' and ')}, the owner's cgroup holds ${held} pids`);
      expect(readText(join(owner, 'pids.max'))).toBe('40');
      // The first holds its 30; the second only what is left of the 40.
      expect(started[0]).toBe(29);
      expect(started[1]! + 1 + 30).toBeLessThanOrEqual(40);
      expect(held).toBeLessThanOrEqual(40);

      // The owner's cgroup is full: a new session of the owner cannot fork, and says why.
      const refused = await daemon.request('POST', '/v1/processes', { body: { argv: ['true'], cwd: '/tmp' } });
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('LIMIT_EXCEEDED');
      expect(refused.body.error.message).toMatch(/40 pids.*--max-owner-pids/);
      expect(await bobRuns(daemon, 10)).toBe(10);

      for (const id of ids.splice(0)) await daemon.request('DELETE', `/v1/processes/${id}`);
      await waitFor("the owner's cgroups to go with its last session", () => !existsSync(owner) && !existsSync(ownerV2), 30_000);
    } finally {
      for (const id of ids) await daemon.request('DELETE', `/v1/processes/${id}`);
    }
  });

  test(
    "the owner's cgroup and its total hold across a takeover, and go with the owner's last session after it",
    { timeout: 180_000 },
    async ({ spawnDaemon }) => {
      const stateDir = mkdtempSync(join(scratch, 'state-'));
      const daemon = await spawnDaemon(['--state-dir', stateDir, '--max-owner-pids', '40']);
      const [before, after] = [join(scratch, 'before'), join(scratch, 'after')];
      const first = await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['python3', '-c', holder(30, before)], cwd: '/tmp' });
      await waitFor('the first to hold its threads', () => readText(before) !== '', 60_000);
      const owner = dirname(pidsCgroupOf(first.pid));
      const ownerV2 = dirname(unifiedCgroupOf(first.pid));
      const takeover = await requestTakeover(stateDir);
      expect(takeover.status, takeover.stderr).toBe(0);
      // The new image's sessions of the owner are made beside the adopted one, under the same total.
      expect(readText(join(owner, 'pids.max'))).toBe('40');
      const second = await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['python3', '-c', holder(30, after)], cwd: '/tmp' });
      await waitFor('the second to hold its threads', () => readText(after) !== '', 60_000);
      expect(dirname(pidsCgroupOf(second.pid))).toBe(owner);
      console.log(
        `across a takeover: threads started ${readText(before)} and ${readText(after)}, the owner's cgroup holds ${readText(join(owner, 'pids.current'))}`,
      );
      expect(Number(readText(after))).toBeLessThanOrEqual(9);
      expect(count(join(owner, 'pids.current'))).toBeLessThanOrEqual(40);
      for (const id of [first.id, second.id]) await callDaemon(daemon, 'DELETE', `/v1/processes/${id}`);
      await waitFor("the owner's cgroups to go with its last session", () => !existsSync(owner) && !existsSync(ownerV2), 30_000);
    },
  );

  test("the owners' cgroups a killed daemon left are swept by the next start", async ({ spawnDaemon }) => {
    const dead = spawnSync('true').pid;
    const left = [`/sys/fs/cgroup/pids/execworld-${dead}`, `/sys/fs/cgroup/unified/execworld-${dead}`];
    for (const directory of left) mkdirSync(join(directory, 'o-0123456789abcdef0123456789abcdef', 's-1'), { recursive: true });
    const daemon = await spawnDaemon();
    const health = await fetch(`${daemon.url}/v1/health`, { headers: { authorization: `Bearer ${daemon.token}` } });
    expect(health.status).toBe(200);
    await waitFor("the dead daemon's cgroups to be swept", () => left.every((directory) => !existsSync(directory)), 30_000);
  });
});
