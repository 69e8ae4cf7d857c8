/**
 * Session limits over the API: `limits` on the creates of processes,
 * terminals, shells and one-call runs; the daemon's ceilings and defaults
 * (--max-session-*, --default-session-*); usage in done answers and run
 * results; /v1/health's word on what this host enforces. Each bomb is bounded
 * (200 forks, 600 MiB, 2 s); the daemon's health latency and another owner's
 * command latency during each are printed for the record.
 */
import { readFileSync } from 'node:fs';
import { describe, expect } from 'vitest';
import { BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';
import { FORK_BOMB } from '../fixtures/fork-bomb.ts';

const test = daemonTest({ containment: 'cgroup' });

/** Milliseconds of a health call, and of bob's `echo` run, while `during` is in flight. */
async function latencies(daemon: TestDaemon, busy: () => boolean): Promise<{ healthMs: number[]; bobMs: number[] }> {
  const healthMs: number[] = [];
  const bobMs: number[] = [];
  while (busy() && healthMs.length < 20) {
    let started = performance.now();
    const health = await daemon.request('GET', '/v1/health');
    expect(health.status).toBe(200);
    healthMs.push(performance.now() - started);
    started = performance.now();
    const run = await daemon.request('POST', '/v1/run', { token: BOB, body: { argv: ['echo', 'bob'], cwd: '/tmp' } });
    expect(run.body).toMatchObject({ exitCode: 0, stdout: 'bob\n' });
    bobMs.push(performance.now() - started);
  }
  return { healthMs, bobMs };
}

const median = (values: number[]): string => (values.length === 0 ? 'n/a' : [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!.toFixed(1));

describe('limits over the API', () => {
  test('health says which limits this host enforces', async ({ daemon }) => {
    const health = await daemon.request('GET', '/v1/health');
    // With the pids controller, all of an owner's sessions are held to a total together: by default half the host's pid_max here.
    const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'latin1'));
    const threadsMax = Number(readFileSync('/proc/sys/kernel/threads-max', 'latin1'));
    expect(health.body.capabilities.limits).toEqual({
      supported: ['memoryBytes', 'pids', 'cpu'],
      unsupported: [],
      ownerPids: Math.floor(Math.min(pidMax, threadsMax) / 2),
    });
  });

  test('bad limits are refused with 400 naming the field', async ({ daemon }) => {
    for (const [path, body] of [
      ['/v1/processes', { argv: ['true'], cwd: '/tmp', limits: { pids: -1 } }],
      ['/v1/processes', { argv: ['true'], cwd: '/tmp', limits: { memoryBytes: 0 } }],
      ['/v1/terminals', { argv: ['true'], cwd: '/tmp', rows: 24, cols: 80, limits: { cpu: 1e9 } }],
      ['/v1/run', { argv: ['true'], cwd: '/tmp', limits: { pids: 1.5 } }],
      ['/v1/shells', { cwd: '/tmp', limits: { memoryBytes: 2 ** 60 } }],
      ['/v1/run', { argv: ['true'], cwd: '/tmp', limits: { disk: 1 } }],
    ] as const) {
      const answer = await daemon.request('POST', path, { body });
      expect(answer.status, `${path} ${JSON.stringify(body.limits)}`).toBe(400);
      expect(answer.body.error.code).toBe('INVALID_ARGUMENT');
      expect(answer.body.error.message).toContain('limits');
    }
  });

  test('a fork bomb under pids 64 via /v1/run: forks fail, health and another owner answer, limitHit pids', async ({ daemon }) => {
    const idle = await latencies(daemon, () => true);
    let running = true;
    const bomb = daemon
      .request('POST', '/v1/run', { body: { argv: ['python3', '-c', FORK_BOMB], cwd: '/tmp', limits: { pids: 64 } } })
      .finally(() => (running = false));
    const during = await latencies(daemon, () => running);
    const result = (await bomb).body;
    console.log(
      `pids bomb: health median ${median(idle.healthMs)} ms idle, ${median(during.healthMs)} ms during (${during.healthMs.length} calls); ` +
        `bob's echo median ${median(idle.bobMs)} ms idle, ${median(during.bobMs)} ms during; bomb stdout ${JSON.stringify(result.stdout)}`,
    );
    const [made, failed] = String(result.stdout).trim().split(' ').map(Number);
    expect(made).toBeLessThan(64);
    expect(failed).toBeGreaterThan(0);
    expect(result.usage).toMatchObject({ limitHit: 'pids', oomKilled: false });
  });

  test('600 MiB under 100 MiB: only it dies, oomKilled, and another owner runs on', async ({ daemon }) => {
    const idle = await latencies(daemon, () => true);
    let running = true;
    const hog = daemon
      .request('POST', '/v1/run', { body: { argv: ['python3', '-c', "x = b'x' * (600 << 20)"], cwd: '/tmp', limits: { memoryBytes: 100 << 20 } } })
      .finally(() => (running = false));
    const during = await latencies(daemon, () => running);
    const result = (await hog).body;
    console.log(
      `memory bomb: health median ${median(idle.healthMs)} ms idle, ${median(during.healthMs)} ms during (${during.healthMs.length} calls); ` +
        `bob's echo median ${median(idle.bobMs)} ms idle, ${median(during.bobMs)} ms during; usage ${JSON.stringify(result.usage)}`,
    );
    expect(result).toMatchObject({ exitCode: null, signal: 'SIGKILL', usage: { limitHit: 'memory', oomKilled: true } });
    expect((await daemon.request('GET', '/v1/health')).status).toBe(200);
  });

  test('a busy loop under cpu 0.25 takes about a quarter core; health and another owner answer', async ({ daemon }) => {
    const idle = await latencies(daemon, () => true);
    let running = true;
    const started = performance.now();
    const loop = daemon
      .request('POST', '/v1/run', {
        body: { argv: ['python3', '-c', 'import time\nend = time.monotonic() + 2\nwhile time.monotonic() < end: pass'], cwd: '/tmp', limits: { cpu: 0.25 } },
      })
      .finally(() => (running = false));
    const during = await latencies(daemon, () => running);
    const result = (await loop).body;
    const cores = (result.usage.cpuUserMs + result.usage.cpuSystemMs) / (performance.now() - started);
    console.log(
      `cpu bomb: ${cores.toFixed(3)} cores; health median ${median(idle.healthMs)} ms idle, ${median(during.healthMs)} ms during; ` +
        `bob's echo median ${median(idle.bobMs)} ms idle, ${median(during.bobMs)} ms during`,
    );
    expect(result.usage.limitHit).toBe('cpu');
    expect(cores).toBeLessThan(0.35);
  });

  test("a process's and a terminal's done answer carry usage", async ({ daemon }) => {
    const created = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['/bin/sh', '-c', 'dd if=/dev/zero bs=1M count=256 status=none | sha256sum'], cwd: '/tmp', stdio: { stdout: { maxBytes: 4096 } } },
    });
    expect(created.status).toBe(201);
    const done = await daemon.request('GET', `/v1/processes/${created.body.id}/done?timeoutMs=30000`);
    console.log('dd | sha256sum usage', JSON.stringify(done.body.usage));
    expect(done.body).toMatchObject({ settled: true, exit: { exitCode: 0, signal: null }, usage: { limitHit: null, oomKilled: false } });
    expect(done.body.usage.cpuUserMs + done.body.usage.cpuSystemMs).toBeGreaterThan(50);
    expect(done.body.usage.peakMemoryBytes).toBeGreaterThan(1 << 20);

    const terminal = await daemon.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/sh', '-c', 'exit 3'], cwd: '/tmp', rows: 24, cols: 80, limits: { pids: 8 } },
    });
    expect(terminal.status).toBe(201);
    const ended = await daemon.request('GET', `/v1/terminals/${terminal.body.id}/done?timeoutMs=30000`);
    expect(ended.body).toMatchObject({ settled: true, exit: { exitCode: 3 }, usage: { limitHit: null, oomKilled: false } });
  });

  test("a running session's info and the lists carry its limits and its usage so far", async ({ daemon }) => {
    const created = await daemon.request('POST', '/v1/processes', {
      body: {
        argv: ['python3', '-c', 'import time\nsum(range(3 * 10 ** 7))\ntime.sleep(30)'],
        cwd: '/tmp',
        limits: { pids: 16 },
      },
    });
    expect(created.status).toBe(201);
    const terminal = await daemon.request('POST', '/v1/terminals', { body: { argv: ['sleep', '30'], cwd: '/tmp', rows: 24, cols: 80, limits: { cpu: 0.5 } } });
    expect(terminal.status).toBe(201);
    try {
      // Its cpu so far is read at the call, while it runs: the sum's work (some 100s of ms of cpu) shows once done.
      let info: { status: string; limits?: object; usage?: { cpuUserMs: number; cpuSystemMs: number } } = created.body;
      await waitFor('the busy part to show in the info', async () => {
        info = (await daemon.request('GET', `/v1/processes/${created.body.id}`)).body;
        return (info.usage?.cpuUserMs ?? 0) + (info.usage?.cpuSystemMs ?? 0) >= 100;
      });
      console.log('running process info usage', JSON.stringify(info.usage));
      expect(info).toMatchObject({ status: 'running', limits: { pids: 16 }, usage: { limitHit: null, oomKilled: false } });
      const listed = (await daemon.request('GET', '/v1/processes')).body.processes.find((entry: { id: string }) => entry.id === created.body.id);
      expect(listed).toMatchObject({ limits: { pids: 16 }, usage: { oomKilled: false } });
      const terminalInfo = (await daemon.request('GET', `/v1/terminals/${terminal.body.id}`)).body;
      expect(terminalInfo).toMatchObject({ status: 'running', limits: { cpu: 0.5 }, usage: { limitHit: null } });
      expect((await daemon.request('GET', '/v1/terminals')).body.terminals.find((entry: { id: string }) => entry.id === terminal.body.id)).toMatchObject({
        limits: { cpu: 0.5 },
        usage: { oomKilled: false },
      });
      // A resize is on the interactive path: its answer reads no cgroup, so it has the limits and no usage.
      const resized = await daemon.request('POST', `/v1/terminals/${terminal.body.id}/resize`, { body: { rows: 30, cols: 100 } });
      expect(resized.status).toBe(200);
      expect(resized.body).toMatchObject({ rows: 30, cols: 100, limits: { cpu: 0.5 } });
      expect(resized.body).not.toHaveProperty('usage');
    } finally {
      await daemon.request('DELETE', `/v1/processes/${created.body.id}`);
      await daemon.request('DELETE', `/v1/terminals/${terminal.body.id}`);
    }
  });

  test("a shell's commands share its limits", async ({ daemon }) => {
    const shell = await daemon.request('POST', '/v1/shells', { body: { cwd: '/tmp', limits: { pids: 32 } } });
    expect(shell.status).toBe(201);
    const run = await daemon.request('POST', `/v1/shells/${shell.body.id}/run`, {
      body: { command: 'cat /sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)/pids.max' },
    });
    expect(run.body).toMatchObject({ exitCode: 0, output: expect.stringContaining('32') });
    await daemon.request('DELETE', `/v1/shells/${shell.body.id}`);
  });

  test("a shell run's answer carries the run's usage: cpu over the run, its own peak", async ({ daemon }) => {
    const shell = await daemon.request('POST', '/v1/shells', { body: { cwd: '/tmp' } });
    expect(shell.status).toBe(201);
    const run = async (command: string): Promise<{ exitCode: number; usage: Record<string, number | string | null> }> =>
      (await daemon.request('POST', `/v1/shells/${shell.body.id}/run`, { body: { command } })).body;
    const hog = await run(`python3 -c "x = b'x' * (80 << 20); import time; end = time.monotonic() + 0.3\nwhile time.monotonic() < end: pass"`);
    const quiet = await run('true');
    console.log('shell runs usage', JSON.stringify(hog.usage), JSON.stringify(quiet.usage));
    expect(hog).toMatchObject({ exitCode: 0, usage: { peakScope: 'run', limitHit: null, oomKilled: false } });
    expect(hog.usage.peakMemoryBytes).toBeGreaterThan(80 << 20);
    expect((hog.usage.cpuUserMs as number) + (hog.usage.cpuSystemMs as number)).toBeGreaterThan(200);
    // The next run's peak and cpu are its own, not the shell's so far.
    expect(quiet.usage.peakMemoryBytes).toBeLessThan(80 << 20);
    expect((quiet.usage.cpuUserMs as number) + (quiet.usage.cpuSystemMs as number)).toBeLessThan(200);
    await daemon.request('DELETE', `/v1/shells/${shell.body.id}`);
  });

  test('the ceilings refuse more and hold a create that asks nothing', async ({ startDaemon }) => {
    const daemon = await startDaemon({ containment: 'cgroup', maxSessionPids: 100, maxSessionMemoryBytes: 512 << 20, defaultSessionPids: 50 });
    const over = await daemon.request('POST', '/v1/run', { body: { argv: ['true'], cwd: '/tmp', limits: { pids: 101 } } });
    expect(over.status).toBe(400);
    expect(over.body.error.message).toMatch(/limits\.pids.*--max-session-pids/);
    const read = (file: string, controller: string, limits?: object): Promise<{ body: { stdout: string } }> =>
      daemon.request('POST', '/v1/run', {
        body: {
          command: `cat /sys/fs/cgroup/${controller}$(grep :${controller}: /proc/self/cgroup | cut -d: -f3)/${file}`,
          cwd: '/tmp',
          ...(limits === undefined ? {} : { limits }),
        },
      });
    // Nothing asked: the default pids, the memory ceiling.
    expect((await read('pids.max', 'pids')).body.stdout).toBe('50\n');
    expect((await read('memory.limit_in_bytes', 'memory')).body.stdout).toBe(`${512 << 20}\n`);
    expect((await read('pids.max', 'pids', { pids: 80 })).body.stdout).toBe('80\n');
  });

  test('where sessions are not in cgroups, health says so and a limit is refused naming it', async ({ startDaemon }) => {
    const daemon = await startDaemon({ containment: 'none' });
    const health = await daemon.request('GET', '/v1/health');
    expect(health.body.capabilities.limits.supported).toEqual([]);
    expect(health.body.capabilities.limits).not.toHaveProperty('ownerPids');
    expect(health.body.capabilities.limits.unsupported.map((entry: { name: string }) => entry.name)).toEqual(['memoryBytes', 'pids', 'cpu']);
    const refused = await daemon.request('POST', '/v1/processes', { body: { argv: ['true'], cwd: '/tmp', limits: { memoryBytes: 64 << 20 } } });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain('limits.memoryBytes');
  });
});
