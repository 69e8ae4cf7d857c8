/**
 * GET /metrics: the counters move with real activity (sessions, bytes in and
 * out, ring evictions, flow-control pauses, calls by operation, auth and
 * spawn failures, memory in use), behind the token unless configured
 * otherwise, and no session id or token is ever a label (an owner is, of its
 * usage only: test/server/metrics-usage.test.ts).
 */
import { describe, expect } from 'vitest';
import { METRICS_PATH } from '@execworld/sdk/protocol';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { metricSample } from '../helpers/metrics.ts';
import { waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
const test = daemonTest({ ringBytes: 64 * 1024 });

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

async function scrape(target = daemon): Promise<string> {
  const answer = await target.request('GET', METRICS_PATH);
  expect(answer.status).toBe(200);
  return answer.body as string;
}

/** The value of sample `name{labels}` in a scrape; 0 when it is not there. */
const sample = (text: string, name: string, labels: Record<string, string> = {}): number => metricSample(text, name, labels) ?? 0;

const piped = (script: string) => ({
  argv: ['/bin/sh', '-c', script],
  cwd: '/tmp',
  stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' },
  graceMs: 1000,
});

describe('GET /metrics', () => {
  test('needs the token, and counts the refusal', async () => {
    const before = sample(await scrape(), 'execworld_auth_failures_total');
    const refused = await daemon.request('GET', METRICS_PATH, { token: null });
    expect(refused.status).toBe(401);
    expect(sample(await scrape(), 'execworld_auth_failures_total')).toBe(before + 1);
  });

  test('moves with sessions, bytes, evictions, pauses, calls and spawn failures', async () => {
    const before = await scrape();
    // A process that echoes its input, and one that floods a ring nobody reads.
    const echo = await daemon.request('POST', '/v1/processes', { body: piped('cat') });
    expect(echo.status).toBe(201);
    const input = 'hello metrics\n';
    expect((await daemon.request('POST', `/v1/processes/${echo.body.id}/stdin`, { body: { data: input } })).status).toBe(200);
    const flood = await daemon.request('POST', '/v1/processes', { body: piped('head -c 1000000 /dev/zero') });
    expect(flood.status).toBe(201);
    // Reading the flood frees its ring: the program resumes and bytes every reader had are evicted.
    let from = 0;
    await waitFor(
      'the flood read to its end',
      async () => {
        const read = await daemon.request('GET', `/v1/processes/${flood.body.id}/output/stdout?from=${from}&maxBytes=65536&waitMs=1000`);
        from = read.body.next as number;
        return from >= 1_000_000;
      },
      30_000,
    );
    const missing = await daemon.request('POST', '/v1/processes', { body: { ...piped(''), argv: ['/definitely/missing/program'] } });
    expect(missing.body.error.code).toBe('EXECUTABLE_NOT_FOUND');
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    await socket.call('terminal.list');
    socket.close();

    const after = await scrape();
    const delta = (name: string, labels?: Record<string, string>): number => sample(after, name, labels) - sample(before, name, labels);
    expect(sample(after, 'execworld_sessions', { kind: 'process', state: 'running' })).toBeGreaterThanOrEqual(1);
    expect(delta('execworld_input_bytes_total')).toBe(input.length);
    expect(delta('execworld_output_bytes_total')).toBeGreaterThanOrEqual(1_000_000);
    expect(delta('execworld_ring_evicted_bytes_total')).toBeGreaterThan(0);
    expect(delta('execworld_flow_pauses_total')).toBeGreaterThan(0);
    expect(delta('execworld_spawn_failures_total', { code: 'EXECUTABLE_NOT_FOUND' })).toBe(1);
    expect(delta('execworld_call_duration_seconds_count', { operation: 'process.create', transport: 'rest', outcome: 'ok' })).toBe(2);
    expect(delta('execworld_call_duration_seconds_count', { operation: 'terminal.list', transport: 'websocket', outcome: 'ok' })).toBe(1);
    expect(sample(after, 'execworld_memory_bytes', { budget: 'rings' })).toBeGreaterThan(0);
    expect(sample(after, 'execworld_process_resident_memory_bytes')).toBeGreaterThan(0);
    // Kinds, operations and codes only: no session id, no token; an owner only as the owner label of its usage.
    for (const secret of [echo.body.id as string, flood.body.id as string, ALICE]) expect(after).not.toContain(secret);
    for (const line of after.split('\n').filter((text) => text.includes('alice'))) expect(line).toMatch(/^execworld_owner_\w+\{owner="alice"[,}]/);

    await daemon.request('DELETE', `/v1/processes/${echo.body.id}`);
    await daemon.request('DELETE', `/v1/processes/${flood.body.id}`);
  });

  test("never holds a session's ending up behind others that wait out their grace, and shows the turns taken", async () => {
    // Programs that outlast SIGTERM (ignored, by the shell and by the sleep it starts): each ending waits its grace.
    const stubborn = { ...piped("trap '' TERM; while :; do sleep 1; done"), graceMs: 5000 };
    const ids: string[] = [];
    for (let index = 0; index < 12; index += 1) {
      const created = await daemon.request('POST', '/v1/processes', { body: stubborn });
      expect(created.status).toBe(201);
      ids.push(created.body.id as string);
    }
    const quick = await daemon.request('POST', '/v1/processes', { body: piped('exec sleep 60') });
    expect(quick.status).toBe(201);
    let stubbornEnded = 0;
    const deletes = ids.map(async (id) => {
      const answer = await daemon.request('DELETE', `/v1/processes/${id}`);
      stubbornEnded += 1;
      return answer;
    });
    // Asked after twelve that take their turns first: it ends while they all still wait out their grace.
    expect((await daemon.request('DELETE', `/v1/processes/${quick.body.id as string}`)).status).toBe(200);
    expect(stubbornEnded).toBe(0);
    // Waiting out their grace, they hold no turn.
    await waitFor('every turn given back', async () => {
      const text = await scrape();
      return sample(text, 'execworld_session_endings', { state: 'running' }) === 0 && sample(text, 'execworld_session_endings', { state: 'waiting' }) === 0;
    });
    expect(stubbornEnded).toBe(0);
    for (const answer of await Promise.all(deletes)) expect(answer.status).toBe(200);
  });

  test('answers without a token with --metrics-auth none', async ({ startDaemon }) => {
    const open = await startDaemon({ metricsAuth: 'none' });
    const answer = await open.request('GET', METRICS_PATH, { token: null });
    expect(answer.status).toBe(200);
    expect(answer.body).toContain('# TYPE execworld_sessions gauge');
  });
});
