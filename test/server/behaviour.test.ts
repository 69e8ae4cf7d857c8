/**
 * The daemon's own behaviour: processes end to end, limits, retention of exit
 * facts, heartbeats, idempotent retries, and TLS.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpsRequest } from 'node:https';
import { describe, expect, vi } from 'vitest';
import { WebSocket } from 'ws';
import { WS_SUBPROTOCOL } from '@execworld/sdk/protocol';
import { MAX_SUBSCRIPTIONS } from '../../service/src/server/ws.ts';
import { selfSignedCertificate } from '../helpers/tls.ts';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

const decode = (read: { data: string }): string => Buffer.from(read.data, 'base64').toString('utf8');

describe('processes over REST', () => {
  test('runs a pipe-mode process: stdin writes and close, stdout from offsets, done, the whole tree', async () => {
    const created = await daemon.request('POST', '/v1/processes', {
      body: {
        argv: ['/bin/sh', '-c', 'tr a-z A-Z; echo done >&2; exit 5'],
        cwd: '/tmp',
        stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' },
        graceMs: 1000,
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ status: 'running', stdin: 'pipe', stdinOpen: true, stdout: { mode: 'pipe' } });
    const id = created.body.id as string;
    expect((await daemon.request('POST', `/v1/processes/${id}/stdin`, { body: { data: 'hello ', writer: 'w1', seq: 1 } })).body).toEqual({
      applied: true,
      seq: 1,
    });
    // A retried write with the same seq is not applied again.
    expect((await daemon.request('POST', `/v1/processes/${id}/stdin`, { body: { data: 'hello ', writer: 'w1', seq: 1 } })).body).toEqual({
      applied: false,
      seq: 1,
    });
    await daemon.request('POST', `/v1/processes/${id}/stdin`, {
      body: { data: Buffer.from('world\n').toString('base64'), encoding: 'base64', writer: 'w1', seq: 2 },
    });
    expect((await daemon.request('POST', `/v1/processes/${id}/stdin/close`)).status).toBe(200);
    // A repeated close (a retry whose first answer was lost) is success too.
    expect((await daemon.request('POST', `/v1/processes/${id}/stdin/close`)).body).toEqual({ ok: true });
    const done = await daemon.request('GET', `/v1/processes/${id}/done`);
    // usage: the session's cgroup counters, which vary run to run.
    expect(done.body).toEqual({
      settled: true,
      exit: { exitCode: 5, signal: null },
      error: null,
      usage: expect.objectContaining({ limitHit: null, oomKilled: false }),
    });
    expect(decode((await daemon.request('GET', `/v1/processes/${id}/output/stdout?from=0`)).body)).toBe('HELLO WORLD\n');
    expect(decode((await daemon.request('GET', `/v1/processes/${id}/output/stderr?from=0`)).body)).toBe('done\n');
    expect(decode((await daemon.request('GET', `/v1/processes/${id}/output/stdout?from=6`)).body)).toBe('WORLD\n');
    expect((await daemon.request('POST', `/v1/processes/${id}/wait`, { body: { timeoutMs: 5000 } })).body).toEqual({ treeExited: true });
    const info = await daemon.request('GET', `/v1/processes/${id}`);
    expect(info.body).toMatchObject({ status: 'exited', exit: { exitCode: 5 }, treeExited: true, stdinOpen: false });
    expect((await daemon.request('POST', `/v1/processes/${id}/stdin`, { body: { data: 'late' } })).body.error.code).toBe('PROCESS_EXITED');
  });

  test("serves the seam's collected reads with tail, spill path and the lossy flag", async () => {
    const created = await daemon.request('POST', '/v1/processes', {
      body: {
        argv: ['/bin/sh', '-c', 'i=1; while [ $i -le 200 ]; do printf "line-%04d\\n" $i; i=$((i+1)); done'],
        cwd: '/tmp',
        stdio: { stdin: 'ignore', stdout: { maxBytes: 500, spill: { maxBytes: 100000 } }, stderr: { maxBytes: 100 } },
        graceMs: 1000,
      },
    });
    const id = created.body.id as string;
    await daemon.request('GET', `/v1/processes/${id}/done`);
    const read = await daemon.request('GET', `/v1/processes/${id}/collected/stdout?from=0`);
    expect(read.body).toMatchObject({ nextOffset: 2000, lossy: true, spillPath: expect.stringMatching(/execworld-.*-stdout\.log$/) });
    expect(read.body.text).toContain('line-0200');
    expect(read.body.text).not.toContain('line-0001');
    expect(readFileSync(read.body.spillPath as string, 'utf8')).toContain('line-0001');
    const bytes = await daemon.request('GET', `/v1/processes/${id}/output/stdout?from=0`);
    expect(bytes.body.gap).toEqual({ from: 0, to: 1500 });
    expect((await daemon.request('GET', `/v1/processes/${id}`)).body.stdout).toMatchObject({
      mode: 'collect',
      start: 1500,
      end: 2000,
      ended: true,
      spillPath: read.body.spillPath,
    });
  });

  test('applies env entries and null tombstones over the scrubbed daemon environment', async () => {
    vi.stubEnv('EXECWORLD_TEST_AMBIENT', 'ambient');
    vi.stubEnv('EXECWORLD_TEST_SECRET', 'hidden');
    const created = await daemon.request('POST', '/v1/processes', {
      body: {
        argv: ['/bin/sh', '-c', 'echo "${EXECWORLD_TEST_AMBIENT:-gone} ${EXECWORLD_TEST_SECRET:-scrubbed} $EXTRA"'],
        cwd: '/tmp',
        env: { EXECWORLD_TEST_AMBIENT: null, EXTRA: 'set' },
        stdio: { stdin: 'ignore', stdout: { maxBytes: 1000 }, stderr: 'pipe' },
        graceMs: 1000,
      },
    });
    await daemon.request('GET', `/v1/processes/${created.body.id}/done`);
    expect((await daemon.request('GET', `/v1/processes/${created.body.id}/collected/stdout?from=0`)).body.text).toBe('gone scrubbed set\n');
  });

  test('resolves executables in the execution world', async () => {
    expect((await daemon.request('POST', '/v1/executables/resolve', { body: { command: 'sh' } })).body.path).toMatch(/\/sh$/);
    const missing = await daemon.request('POST', '/v1/executables/resolve', { body: { command: 'definitely-missing' } });
    expect(missing.status).toBe(422);
    expect(missing.body.error.code).toBe('EXECUTABLE_NOT_FOUND');
    expect((await daemon.request('POST', '/v1/executables/resolve', { body: { command: './relative' } })).status).toBe(400);
  });

  test("says nothing of the daemon's own working directory: a relative PATH entry is taken from /", async () => {
    const own = mkdtempSync(join(tmpdir(), 'ew-daemon-cwd-'));
    writeFileSync(join(own, 'only-in-daemon-cwd'), '#!/bin/sh\n', { mode: 0o755 });
    const before = process.cwd();
    process.chdir(own);
    try {
      const answer = await daemon.request('POST', '/v1/executables/resolve', { body: { command: 'only-in-daemon-cwd', env: { PATH: '.:' } } });
      expect(answer.status).toBe(422);
      expect(answer.body.error.code).toBe('EXECUTABLE_NOT_FOUND');
    } finally {
      process.chdir(before);
    }
  });
});

describe('terminals over REST', () => {
  test('applies input once per seq, resizes, and reports its foreground', async () => {
    const created = await daemon.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/tmp', env: { PS1: '$ ' }, rows: 24, cols: 80, graceMs: 1000 },
    });
    const id = created.body.id as string;
    await waitFor('the prompt', async () => (await daemon.request('GET', `/v1/terminals/${id}/foreground`)).body.foreground?.inputWaiting === true);
    const input = (body: Record<string, unknown>) => daemon.request('POST', `/v1/terminals/${id}/input`, { body });
    expect((await input({ data: 'echo one\r', writer: 'first', seq: 1 })).body.applied).toBe(true);
    expect((await input({ data: 'echo one\r', writer: 'first', seq: 1 })).body.applied).toBe(false);
    // Another writer counts its own numbers: its first write is applied, not taken for a retry.
    expect((await input({ data: 'echo two\r', writer: 'second', seq: 1 })).body.applied).toBe(true);
    expect(await input({ data: 'x', seq: 3 })).toMatchObject({
      status: 400,
      body: { error: { code: 'INVALID_ARGUMENT', message: expect.stringMatching(/seq needs a writer/) as string } },
    });
    expect((await daemon.request('POST', `/v1/terminals/${id}/resize`, { body: { rows: 30, cols: 100 } })).body).toMatchObject({ rows: 30, cols: 100 });
    await input({ data: 'stty size\r', writer: 'first', seq: 2 });
    await waitFor('stty', async () => decode((await daemon.request('GET', `/v1/terminals/${id}/output?from=0`)).body).includes('30 100'));
    const text = decode((await daemon.request('GET', `/v1/terminals/${id}/output?from=0`)).body);
    expect(text.match(/\r\none\r\n/g)).toHaveLength(1);
    expect(text.match(/\r\ntwo\r\n/g)).toHaveLength(1);
    const terminated = await daemon.request('POST', `/v1/terminals/${id}/terminate`);
    expect(terminated.body).toMatchObject({ status: 'exited', treeExited: true, exit: { signal: 'SIGHUP' } });
  });

  test('long-polls output until bytes arrive', async () => {
    // The program prints only after input the test sends while the poll is open, however slow its start.
    const created = await daemon.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/sh', '-c', 'stty -echo; read line; echo late'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 },
    });
    const id = created.body.id as string;
    await waitFor('the read', async () => (await daemon.request('GET', `/v1/terminals/${id}/foreground`)).body.foreground?.inputWaiting === true);
    let answered = false;
    const read = daemon.request('GET', `/v1/terminals/${id}/output?from=0&waitMs=30000`).finally(() => (answered = true));
    // A fixed pause is right here: it checks that the poll does not answer while there is nothing.
    await sleep(200);
    expect(answered).toBe(false);
    await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'go\r' } });
    expect(decode((await read).body)).toContain('late');
  });
});

describe('limits and retention', () => {
  test('answers 429 past the per-owner limit, and counts only running sessions', async ({ startDaemon }) => {
    const limited = await startDaemon({ maxSessionsPerOwner: 2 });
    const spec = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 };
    const a = await limited.request('POST', '/v1/terminals', { body: spec });
    await limited.request('POST', '/v1/terminals', { body: spec });
    const third = await limited.request('POST', '/v1/terminals', { body: spec });
    expect(third.status).toBe(429);
    expect(third.body.error.code).toBe('LIMIT_EXCEEDED');
    await limited.request('POST', `/v1/terminals/${a.body.id}/terminate`);
    expect((await limited.request('POST', '/v1/terminals', { body: spec })).status).toBe(201);
  });

  test('keeps exit facts for the retention period, then forgets the session', async ({ startDaemon }) => {
    // Two daemons, so that no step depends on how fast the test runs: the shared
    // one keeps ended sessions for ten minutes, the short one for 300 ms.
    const kept = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/sh', '-c', 'exit 9'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 } });
    await daemon.request('GET', `/v1/terminals/${kept.body.id}/done`);
    await waitFor('the session to be closed', async () => (await daemon.request('GET', `/v1/terminals/${kept.body.id}`)).body.treeExited === true);
    expect((await daemon.request('GET', `/v1/terminals/${kept.body.id}`)).body.exit).toEqual({ exitCode: 9, signal: null });
    const short = await startDaemon({ retentionMs: 300 });
    const created = await short.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/sh', '-c', 'exit 9'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 },
    });
    await short.request('GET', `/v1/terminals/${created.body.id}/done`);
    await waitFor('the session to be forgotten', async () => (await short.request('GET', `/v1/terminals/${created.body.id}`)).status === 404, 20_000);
  });

  test('keeps a session running after its client disconnects', async () => {
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    const connected = daemon.daemon.hub.connections;
    // The program ends only on input sent after the daemon has seen the client go.
    const info = await socket.call('terminal.create', {
      argv: ['/bin/sh', '-c', 'stty -echo; read line; echo survived'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 500,
    });
    socket.socket.terminate();
    await waitFor('the daemon to see the client go', () => daemon.daemon.hub.connections < connected);
    await daemon.request('POST', `/v1/terminals/${info.id}/input`, { body: { data: 'go\r' } });
    const done = await daemon.request('GET', `/v1/terminals/${info.id}/done`);
    expect(done.body.exit).toEqual({ exitCode: 0, signal: null });
    expect(decode((await daemon.request('GET', `/v1/terminals/${info.id}/output?from=0`)).body)).toContain('survived');
  });
});

describe('connection limits', () => {
  test('refuses subscriptions beyond the per-connection limit, and keeps the connection', async () => {
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    const info = await socket.call('terminal.create', { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 });
    const target = { kind: 'terminal', id: info.id, stream: 'output' };
    for (let index = 0; index < MAX_SUBSCRIPTIONS; index += 1) socket.send({ t: 'subscribe', id: 10_000 + index, params: { target, from: 0 } });
    await socket.until('every subscription', () => socket.messages.filter((m) => m.t === 'result' && m.id >= 10_000).length === MAX_SUBSCRIPTIONS || undefined);
    await expect(socket.subscribe({ target, from: 0 })).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' });
    await expect(socket.call('terminal.delete', { id: info.id })).resolves.toEqual({ ok: true });
    socket.close();
  });
});

describe('heartbeats', () => {
  test('drops a peer that stops answering pings', async ({ startDaemon }) => {
    const quick = await startDaemon({ heartbeatMs: 100 });
    const socket = await TestSocket.open(quick.wsUrl, { token: ALICE });
    // Stop reading: pings go unanswered.
    (socket.socket as unknown as { _socket: { pause(): void } })._socket.pause();
    await waitFor('the daemon to drop the connection', () => quick.daemon.hub.connections === 0, 20_000);
  });
});

describe('TLS', () => {
  test('serves HTTPS with a given certificate and key', async ({ startDaemon }) => {
    const { cert, key } = selfSignedCertificate();
    const secure = await startDaemon({ tlsCert: cert, tlsKey: key });
    expect(secure.url).toMatch(/^https:/);
    const body = await new Promise<string>((resolve, reject) => {
      const request = httpsRequest(`${secure.url}/v1/health`, { ca: readFileSync(cert) }, (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve(text));
      });
      request.on('error', reject);
      request.end();
    });
    expect(JSON.parse(body)).toMatchObject({ status: 'ok' });
  });

  test('admits a browser upgrade from its own https origin, and not from the http one of the same host', async ({ startDaemon }) => {
    const { cert, key } = selfSignedCertificate();
    const secure = await startDaemon({ tlsCert: cert, tlsKey: key });
    const { host } = new URL(secure.url);
    /** The status an upgrade from `origin` gets: 101 when it opens. */
    const upgrade = (origin: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const socket = new WebSocket(secure.wsUrl, [WS_SUBPROTOCOL], { ca: readFileSync(cert), headers: { authorization: `Bearer ${ALICE}`, origin } });
        socket.once('open', () => {
          socket.close();
          resolve(101);
        });
        socket.once('unexpected-response', (request, response) => {
          request.destroy();
          resolve(response.statusCode ?? 0);
        });
        socket.once('error', reject);
      });
    expect(await upgrade(`https://${host}`)).toBe(101);
    expect(await upgrade(`http://${host}`)).toBe(403);
  });
});
