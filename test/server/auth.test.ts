/**
 * Auth over the whole route table: every route the operation table defines,
 * plus the WebSocket endpoint, refuses a missing or wrong token. A new route
 * cannot forget auth, because this test walks the table.
 */
import { describe, expect } from 'vitest';
import { LIVE_PATH, OPERATION_LIST, READY_PATH, TOKEN_HEADER } from '@execworld/sdk/protocol';
import { ALICE, BOB, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

let daemon: TestDaemon;
const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

const concrete = (path: string): string => path.replace('{id}', 't_doesnotexist000').replace('{stream}', 'stdout');

describe('auth', () => {
  test('covers every route of the table', () => {
    const routes = daemon.daemon.app.printRoutes({ commonPrefix: false });
    for (const spec of OPERATION_LIST)
      expect(routes).toContain(
        spec.path
          .replace(/\{(\w+)\}/g, ':$1')
          .split('/')
          .pop(),
      );
  });

  test.each(OPERATION_LIST.filter((spec) => spec.auth).map((spec) => [spec.name, spec] as const))(
    '%s refuses a missing or wrong token',
    async (_name, spec) => {
      const body = spec.method === 'POST' ? {} : undefined;
      const missing = await daemon.request(spec.method, concrete(spec.path), { token: null, body });
      expect(missing.status).toBe(401);
      expect(missing.body).toEqual({ error: { code: 'UNAUTHORIZED', message: expect.any(String) } });
      const wrong = await daemon.request(spec.method, concrete(spec.path), { token: 'not-the-token-at-all', body });
      expect(wrong.status).toBe(401);
      const malformed = await daemon.request(spec.method, concrete(spec.path), { token: null, body, headers: { authorization: `Basic ${ALICE}` } });
      expect(malformed.status).toBe(401);
    },
  );

  test('serves health without a token, and only health', async () => {
    const open = OPERATION_LIST.filter((spec) => !spec.auth).map((spec) => spec.name);
    expect(open).toEqual(['health.get']);
    const health = await daemon.request('GET', '/v1/health', { token: null });
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok', protocolVersion: 1, capabilities: { terminals: true, exactInputWait: true } });
  });

  test('accepts the token in X-Execworld-Token, for a proxy that strips Authorization, on routes and upgrades', async () => {
    const listed = await daemon.request('GET', '/v1/terminals', { token: null, headers: { [TOKEN_HEADER]: BOB } });
    expect(listed).toMatchObject({ status: 200, body: { terminals: [] } });
    const wrong = await daemon.request('GET', '/v1/terminals', { token: null, headers: { [TOKEN_HEADER]: 'not-the-token-at-all' } });
    expect(wrong).toMatchObject({ status: 401, body: { error: { code: 'UNAUTHORIZED' } } });
    const empty = await daemon.request('GET', '/v1/terminals', { token: null, headers: { [TOKEN_HEADER]: ' ' } });
    expect(empty).toMatchObject({ status: 401, body: { error: { code: 'UNAUTHORIZED', message: 'a bearer token is required' } } });
    const socket = await TestSocket.open(daemon.wsUrl, { headers: { [TOKEN_HEADER]: BOB } });
    await expect(socket.call('terminal.list')).resolves.toEqual({ terminals: [] });
    socket.close();
  });

  test('answers the probes without a token: live while the loop runs, ready until shutdown', async ({ startDaemon }) => {
    expect(await daemon.request('GET', LIVE_PATH, { token: null })).toMatchObject({ status: 200, body: { status: 'live' } });
    expect(await daemon.request('GET', READY_PATH, { token: null })).toMatchObject({ status: 200, body: { status: 'ready' } });
    const closing = await startDaemon();
    const shutdown = closing.daemon.registry.shutdown();
    expect(await closing.request('GET', READY_PATH, { token: null })).toMatchObject({ status: 503, body: { error: { code: 'SHUTTING_DOWN' } } });
    expect(await closing.request('GET', LIVE_PATH, { token: null })).toMatchObject({ status: 200 });
    await shutdown;
  });

  test('tells a stranger nothing about unknown paths', async () => {
    expect((await daemon.request('GET', '/v1/nothing-here', { token: null })).status).toBe(401);
    const known = await daemon.request('GET', '/v1/nothing-here');
    expect(known.status).toBe(404);
    expect(known.body.error.code).toBe('NOT_FOUND');
  });

  test('refuses a WebSocket upgrade without a valid token', async () => {
    await expect(TestSocket.open(daemon.wsUrl)).rejects.toMatchObject({ status: 401 });
    await expect(TestSocket.open(daemon.wsUrl, { token: 'wrong-token-xxxxxxxxxxxx' })).rejects.toMatchObject({ status: 401 });
    const socket = await TestSocket.open(daemon.wsUrl, { token: BOB });
    await expect(socket.call('terminal.list')).resolves.toEqual({ terminals: [] });
    socket.close();
  });

  test('accepts the token as a Kubernetes-style subprotocol, and never echoes it', async () => {
    const encoded = Buffer.from(ALICE).toString('base64url');
    const socket = await TestSocket.open(daemon.wsUrl, { protocols: ['execworld.v1', `base64url.bearer.authorization.k8s.io.${encoded}`] });
    expect(socket.socket.protocol).toBe('execworld.v1');
    await expect(socket.call('terminal.list')).resolves.toEqual({ terminals: [] });
    socket.close();
  });

  test('refuses a cross-origin browser upgrade even with a valid token', async () => {
    await expect(TestSocket.open(daemon.wsUrl, { token: ALICE, headers: { origin: 'http://evil.example' } })).rejects.toMatchObject({ status: 403 });
  });

  test("admits a browser upgrade from the daemon's own origin, as the request addressed it, and no other", async () => {
    const { host, port } = new URL(daemon.url);
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE, headers: { origin: `http://${host}` } });
    await expect(socket.call('identity.get')).resolves.toEqual({ owner: 'alice', access: 'write' });
    socket.close();
    const other = String(Number(port) === 65_535 ? 1 : Number(port) + 1);
    for (const origin of ['http://evil.example', `http://127.0.0.1:${other}`, `https://${host}`, `http://${host}/`, `http://localhost:${port}`]) {
      await expect(TestSocket.open(daemon.wsUrl, { token: ALICE, headers: { origin } }), origin).rejects.toMatchObject({ status: 403 });
    }
    // The Host decides which origin is the daemon's own: a page on another name for this address is its own origin.
    const named = await TestSocket.open(daemon.wsUrl, { token: ALICE, headers: { origin: `http://localhost:${port}`, host: `localhost:${port}` } });
    named.close();
  });

  test('admits an origin the configuration allows', async ({ startDaemon }) => {
    const allowing = await startDaemon({ allowedOrigins: ['http://ide.example'] });
    const socket = await TestSocket.open(allowing.wsUrl, { token: ALICE, headers: { origin: 'http://ide.example' } });
    socket.close();
    await expect(TestSocket.open(allowing.wsUrl, { token: ALICE, headers: { origin: 'http://other.example' } })).rejects.toMatchObject({ status: 403 });
  });
});

describe('owners', () => {
  test("answers 404 for another owner's terminal and process, and lists only one's own", async () => {
    const terminal = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 } });
    expect(terminal.status).toBe(201);
    const process = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['/bin/cat'], cwd: '/tmp', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 },
    });
    expect(process.status).toBe(201);
    for (const path of [`/v1/terminals/${terminal.body.id}`, `/v1/terminals/${terminal.body.id}/output`, `/v1/processes/${process.body.id}`]) {
      const foreign = await daemon.request('GET', path, { token: BOB });
      expect(foreign.status).toBe(404);
      expect(foreign.body.error.code).toBe('NOT_FOUND');
    }
    expect((await daemon.request('POST', `/v1/terminals/${terminal.body.id}/input`, { token: BOB, body: { data: 'x' } })).status).toBe(404);
    expect((await daemon.request('DELETE', `/v1/processes/${process.body.id}`, { token: BOB })).status).toBe(404);
    expect((await daemon.request('GET', '/v1/terminals', { token: BOB })).body).toEqual({ terminals: [] });
    expect((await daemon.request('GET', '/v1/terminals')).body.terminals.map((t: { id: string }) => t.id)).toContain(terminal.body.id);
    const socket = await TestSocket.open(daemon.wsUrl, { token: BOB });
    await expect(socket.subscribe({ target: { kind: 'terminal', id: terminal.body.id, stream: 'output' }, from: 0 })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    socket.close();
    expect((await daemon.request('DELETE', `/v1/terminals/${terminal.body.id}`)).status).toBe(200);
    expect((await daemon.request('DELETE', `/v1/processes/${process.body.id}`)).status).toBe(200);
  });
});
