/**
 * Collected output costs bounded memory daemon-wide, and spill files live
 * exactly as long as their session: removed on delete, at the end of
 * retention, at shutdown, and after a crash by the next daemon.
 */
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonTest();

const spilling = (script: string, maxBytes = 1024) => ({
  argv: ['/bin/sh', '-c', script],
  cwd: '/tmp',
  stdio: { stdin: 'ignore', stdout: { maxBytes, spill: { maxBytes: 1 << 24 } }, stderr: 'pipe' },
  graceMs: 500,
});

/** Starts a process that spills, waits for its end, and returns its id and spill file. */
async function spilled(daemon: TestDaemon): Promise<{ id: string; path: string }> {
  const created = await daemon.request('POST', '/v1/processes', { body: spilling('seq 1 5000') });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  await daemon.request('GET', `/v1/processes/${id}/done?timeoutMs=10000`);
  const info = await daemon.request('GET', `/v1/processes/${id}`);
  const path = info.body.stdout.spillPath as string;
  expect(existsSync(path)).toBe(true);
  return { id, path };
}

describe('spill files', () => {
  test('are removed when the session is deleted, when its retention ends, and at shutdown', async ({ startDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'ew-state-'));
    const daemon = await startDaemon({ stateDir, retentionMs: 300 });
    const deleted = await spilled(daemon);
    await daemon.request('DELETE', `/v1/processes/${deleted.id}`);
    expect(existsSync(deleted.path)).toBe(false);

    const retained = await spilled(daemon);
    await waitFor('retention to end', () => !existsSync(retained.path));

    const longer = await startDaemon({ stateDir });
    const atShutdown = await spilled(longer);
    await longer.close();
    expect(existsSync(atShutdown.path)).toBe(false);
    await daemon.close();
  });

  test("that a dead daemon left behind are removed by the next one, and a live one's are kept", async ({ startDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'ew-state-'));
    // A pid above pid_max is never alive.
    const dead = join(stateDir, 'spill', 'execworld-99999999-AbC123');
    const live = join(stateDir, 'spill', `execworld-${process.pid}-XyZ789`);
    for (const directory of [dead, live]) {
      mkdirSync(directory, { recursive: true });
      writeFileSync(join(directory, 'execworld-1-1-000000000000-stdout.log'), 'left behind');
    }
    const daemon = await startDaemon({ stateDir });
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(live)).toBe(true);
    await daemon.close();
  });
});

describe('the collect budget', () => {
  test('refuses a process whose collected tails would pass it, with 429, while a running one holds its maxBytes', async ({ startDaemon }) => {
    const daemon = await startDaemon({ collectBudgetBytes: 3 * 1024 * 1024 });
    const first = await daemon.request('POST', '/v1/processes', { body: spilling('sleep 300', 2 * 1024 * 1024) });
    expect(first.status).toBe(201);
    const second = await daemon.request('POST', '/v1/processes', { body: spilling('true', 2 * 1024 * 1024) });
    expect(second).toMatchObject({ status: 429, body: { error: { code: 'LIMIT_EXCEEDED', message: expect.stringMatching(/collected output/) as string } } });
    // A process that collects nothing needs no budget.
    expect(
      (await daemon.request('POST', '/v1/processes', { body: { ...spilling('true'), stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } } })).status,
    ).toBe(201);
    await daemon.request('DELETE', `/v1/processes/${first.body.id}`);
    expect((await daemon.request('POST', '/v1/processes', { body: spilling('true', 2 * 1024 * 1024) })).status).toBe(201);
    await daemon.close();
  });

  test('gets back what an ended process did not collect, while its retained tail stays readable and keeps its bytes', async ({ startDaemon }) => {
    const MiB = 1024 * 1024;
    const daemon = await startDaemon({ collectBudgetBytes: 3 * MiB });
    /** Runs `script` collecting up to 2 MiB of its stdout, and waits until its collected streams ended. */
    const ended = async (script: string): Promise<string> => {
      const created = await daemon.request('POST', '/v1/processes', { body: spilling(script, 2 * MiB) });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      await waitFor('the collected stream to end', async () => (await daemon.request('GET', `/v1/processes/${id}`)).body.stdout.ended === true, 30_000);
      return id;
    };
    const small = await ended('echo little');
    // Retained for the retention period, its tail holds 7 bytes: the other 2 MiB of its reservation are free again.
    const next = await daemon.request('POST', '/v1/processes', { body: spilling('true', 2 * MiB) });
    expect(next.status).toBe(201);
    expect((await daemon.request('GET', `/v1/processes/${small}/collected/stdout?from=0`)).body).toMatchObject({ text: 'little\n', lossy: false });
    await daemon.request('DELETE', `/v1/processes/${next.body.id}`);
    // A retained tail that is full still holds its bytes of the budget: the budget bounds them too.
    const full = await ended('head -c 3000000 /dev/zero');
    const refused = await daemon.request('POST', '/v1/processes', { body: spilling('true', 2 * MiB) });
    expect(refused).toMatchObject({ status: 429, body: { error: { code: 'LIMIT_EXCEEDED', message: expect.stringMatching(/collected output/) as string } } });
    expect((await daemon.request('GET', `/v1/processes/${full}`)).body.stdout).toMatchObject({ start: 3_000_000 - 2 * MiB, end: 3_000_000 });
    await daemon.request('DELETE', `/v1/processes/${full}`);
    expect((await daemon.request('POST', '/v1/processes', { body: spilling('true', 2 * MiB) })).status).toBe(201);
    await daemon.close();
  });
});
