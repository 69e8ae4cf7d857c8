/**
 * GET /metrics' per-owner usage over a daemon with cgroup containment: cpu
 * seconds, the sessions that ran into each limit, OOM kills and memory in use
 * now, each labelled by the owner of the token file whose sessions used it,
 * and never another's. The counters never go down, a session forgotten
 * included. A scrape's time with many running sessions is printed.
 */
import { describe, expect } from 'vitest';
import { METRICS_PATH } from '@execworld/sdk/protocol';
import { BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { FORK_BOMB } from '../fixtures/fork-bomb.ts';
import { metricSample } from '../helpers/metrics.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonTest({ containment: 'cgroup' });

async function scrape(daemon: TestDaemon): Promise<string> {
  const answer = await daemon.request('GET', METRICS_PATH);
  expect(answer.status).toBe(200);
  return answer.body as string;
}

/** An owner's cpu seconds, user and system together. */
function cpuSeconds(text: string, owner: string): number {
  const user = metricSample(text, 'execworld_owner_cpu_seconds_total', { owner, mode: 'user' });
  const system = metricSample(text, 'execworld_owner_cpu_seconds_total', { owner, mode: 'system' });
  expect(user, `cpu of ${owner}`).toBeDefined();
  expect(system, `cpu of ${owner}`).toBeDefined();
  return user! + system!;
}

function limitHits(text: string, owner: string, limit: string): number {
  const value = metricSample(text, 'execworld_owner_limit_hits_total', { owner, limit });
  expect(value, `${limit} hits of ${owner}`).toBeDefined();
  return value!;
}

const BURN = 'import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass';

describe('per-owner usage in GET /metrics', () => {
  test("a session that burns cpu counts in its owner's counter, not the other's, and stays counted once forgotten", async ({ daemon }) => {
    const before = await scrape(daemon);
    const burner = await daemon.request('POST', '/v1/processes', { body: { argv: ['python3', '-c', BURN], cwd: '/tmp' } });
    expect(burner.status).toBe(201);
    // Running: its cpu so far shows already.
    let running = before;
    await waitFor(
      "the running burner's cpu in alice's counter",
      async () => {
        running = await scrape(daemon);
        return cpuSeconds(running, 'alice') - cpuSeconds(before, 'alice') > 0.2;
      },
      30_000,
    );
    const bob = await daemon.request('POST', '/v1/run', { token: BOB, body: { argv: ['echo', 'bob'], cwd: '/tmp' } });
    expect(bob.body).toMatchObject({ exitCode: 0 });
    const done = await daemon.request('GET', `/v1/processes/${burner.body.id}/done?timeoutMs=30000`);
    expect(done.body).toMatchObject({ settled: true, exit: { exitCode: 0 } });
    const ended = await scrape(daemon);
    const aliceSeconds = cpuSeconds(ended, 'alice') - cpuSeconds(before, 'alice');
    const bobSeconds = cpuSeconds(ended, 'bob') - cpuSeconds(before, 'bob');
    console.log(`cpu: alice +${aliceSeconds.toFixed(3)} s (burner usage ${JSON.stringify(done.body.usage)}), bob +${bobSeconds.toFixed(3)} s`);
    expect(cpuSeconds(ended, 'alice')).toBeGreaterThanOrEqual(cpuSeconds(running, 'alice'));
    // At least what the burner itself used (a shared machine gives it what it can of its 1.5 s).
    const burned = (done.body.usage.cpuUserMs + done.body.usage.cpuSystemMs) / 1000;
    expect(burned).toBeGreaterThan(0.3);
    expect(aliceSeconds).toBeGreaterThanOrEqual(burned - 0.002);
    expect(bobSeconds).toBeLessThan(0.5);

    // Forgotten, its cpu stays in alice's counter: a counter never goes down.
    expect((await daemon.request('DELETE', `/v1/processes/${burner.body.id}`)).status).toBe(200);
    expect((await daemon.request('GET', `/v1/processes/${burner.body.id}`)).status).toBe(404);
    const forgotten = await scrape(daemon);
    expect(cpuSeconds(forgotten, 'alice')).toBeGreaterThanOrEqual(cpuSeconds(ended, 'alice'));
  });

  test('a fork bomb under pids 64 counts a pids hit for its owner only; memory now and OOM kills by owner', async ({ daemon }) => {
    const before = await scrape(daemon);
    const bomb = await daemon.request('POST', '/v1/run', { token: BOB, body: { argv: ['python3', '-c', FORK_BOMB], cwd: '/tmp', limits: { pids: 64 } } });
    expect(bomb.body.usage).toMatchObject({ limitHit: 'pids' });
    const hog = await daemon.request('POST', '/v1/run', {
      body: { argv: ['python3', '-c', "x = b'x' * (300 << 20)"], cwd: '/tmp', limits: { memoryBytes: 50 << 20 } },
    });
    expect(hog.body.usage).toMatchObject({ oomKilled: true });
    // Memory now: a process that holds 64 MiB until its stdin closes.
    const holder = await daemon.request('POST', '/v1/processes', {
      body: {
        argv: ['python3', '-c', "import sys\nx = b'x' * (64 << 20)\nprint('held', flush=True)\nsys.stdin.read()"],
        cwd: '/tmp',
        stdio: { stdin: 'pipe', stdout: 'pipe' },
      },
    });
    expect(holder.status).toBe(201);
    let held = '';
    await waitFor(
      'the holder to hold its memory',
      async () => {
        held = await scrape(daemon);
        return (metricSample(held, 'execworld_owner_memory_bytes', { owner: 'alice' }) ?? 0) >= 64 << 20;
      },
      30_000,
    );
    await daemon.request('DELETE', `/v1/processes/${holder.body.id}`);
    const after = await scrape(daemon);
    console.log(
      `limit hits: bob pids +${limitHits(after, 'bob', 'pids') - limitHits(before, 'bob', 'pids')}; alice memory +${limitHits(after, 'alice', 'memory') - limitHits(before, 'alice', 'memory')}; ` +
        `alice memory now while the holder ran ${metricSample(held, 'execworld_owner_memory_bytes', { owner: 'alice' })} bytes`,
    );
    expect(limitHits(after, 'bob', 'pids') - limitHits(before, 'bob', 'pids')).toBe(1);
    expect(limitHits(after, 'alice', 'pids') - limitHits(before, 'alice', 'pids')).toBe(0);
    expect(limitHits(after, 'alice', 'memory') - limitHits(before, 'alice', 'memory')).toBe(1);
    expect(limitHits(after, 'bob', 'memory') - limitHits(before, 'bob', 'memory')).toBe(0);
    const oom = (text: string, owner: string): number => metricSample(text, 'execworld_owner_oom_kills_total', { owner }) ?? Number.NaN;
    expect(oom(after, 'alice') - oom(before, 'alice')).toBeGreaterThanOrEqual(1);
    expect(oom(after, 'bob') - oom(before, 'bob')).toBe(0);
  });

  test("the owner label takes the token file's owners only, whatever the sessions; a scrape's time with 40 running", async ({ daemon }) => {
    const timed = async (): Promise<number> => {
      const times: number[] = [];
      for (let i = 0; i < 9; i++) {
        const started = performance.now();
        await scrape(daemon);
        times.push(performance.now() - started);
      }
      return times.sort((a, b) => a - b)[4]!;
    };
    const idle = await timed();
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      for (const token of [undefined, BOB]) {
        const sleeper = await daemon.request('POST', '/v1/processes', {
          ...(token === undefined ? {} : { token }),
          body: { argv: ['sleep', '60'], cwd: '/tmp' },
        });
        expect(sleeper.status).toBe(201);
        ids.push(`${token ?? ''}:${sleeper.body.id as string}`);
      }
    }
    const busy = await timed();
    const text = await scrape(daemon);
    expect(metricSample(text, 'execworld_sessions', { kind: 'process', state: 'running' })).toBeGreaterThanOrEqual(40);
    // Two owners, two modes: as many series as before the sessions, and no session id anywhere.
    const series = text.split('\n').filter((line) => line.startsWith('execworld_owner_cpu_seconds_total{'));
    expect(series.map((line) => line.split(' ')[0]).sort()).toEqual(
      ['alice', 'bob'].flatMap((owner) => ['system', 'user'].map((mode) => `execworld_owner_cpu_seconds_total{owner="${owner}",mode="${mode}"}`)),
    );
    for (const entry of ids) expect(text).not.toContain(entry.split(':')[1]!);
    console.log(`scrape median: ${idle.toFixed(1)} ms with no session running, ${busy.toFixed(1)} ms with 40 running`);
    for (const entry of ids) {
      const [token, id] = entry.split(':') as [string, string];
      await daemon.request('DELETE', `/v1/processes/${id}`, token === '' ? {} : { token });
    }
  });
});
