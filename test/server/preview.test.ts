/**
 * Preview URLs (/v1/ports/{port}/…): a real HTTP server started inside the
 * world through the daemon, reached through the daemon's proxy. The app gets
 * the request as asked of localhost:{port}, with X-Forwarded-* set and none
 * of the daemon's credentials; a token in the query becomes a cookie scoped
 * to the port's path; the port is checked against the token's scope; a port
 * nothing listens on answers 502 PORT_REFUSED.
 */
import { WebSocket } from 'ws';
import { beforeAll, describe, expect } from 'vitest';
import { ALICE, ALICE_READER, BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { freePort, startPreviewApp } from '../helpers/preview-app.ts';
import { waitFor } from '../helpers/wait.ts';

let appPort = 0;
let idlePort = 0;
let appProcess = '';
let appPid = 0;

const test = daemonTest();

describe('preview URLs', () => {
  let daemon: TestDaemon;
  let prefix: string;
  /** Minted tokens: one that may only read, scoped to the app's port; one scoped to another port. */
  let scopedRead: string;
  let otherScope: string;

  /** A token alice mints, for an hour unless said, and its id. */
  async function mintWithId(scope: { access: 'read' | 'write'; port: number }): Promise<{ id: string; token: string }> {
    const minted = await daemon.request('POST', '/v1/tokens', { body: { ttlMs: 3_600_000, ...scope } });
    expect(minted.status).toBe(201);
    return minted.body as { id: string; token: string };
  }
  const mint = async (scope: { access: 'read' | 'write'; port: number }): Promise<string> => (await mintWithId(scope)).token;

  beforeAll(async () => {
    appPort = await freePort();
    idlePort = await freePort();
    prefix = `/v1/ports/${appPort}`;
  });

  test.beforeAll(async ({ daemon: fileDaemon }) => {
    daemon = fileDaemon;
    const started = await startPreviewApp(daemon, appPort, 30_000);
    appProcess = started.id;
    appPid = started.pid;
    scopedRead = await mint({ access: 'read', port: appPort });
    otherScope = await mint({ access: 'write', port: idlePort });
  }, 60_000);

  test('the app gets the request as asked of localhost:{port}, with X-Forwarded-* and none of the daemon credentials', async () => {
    const response = await fetch(`${daemon.url}${prefix}/headers?keep=1&token=${ALICE}&also=2`, {
      headers: { authorization: `Bearer ${ALICE}`, 'x-execworld-token': ALICE, cookie: `app=1; execworld_preview=${ALICE}; other=2` },
    });
    expect(response.status).toBe(200);
    const seen = (await response.json()) as { url: string; headers: Record<string, string> };
    expect(seen.url).toBe('/headers?keep=1&also=2');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-execworld-token']).toBeUndefined();
    expect(seen.headers.cookie).toBe('app=1; other=2');
    expect(JSON.stringify(seen.headers)).not.toContain(ALICE);
    expect(seen.headers.host).toBe(`localhost:${appPort}`);
    expect(seen.headers['x-forwarded-host']).toBe(new URL(daemon.url).host);
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['x-forwarded-prefix']).toBe(prefix);
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  test('a token in the query becomes a cookie of the port path, and the redirect drops it from the URL', async () => {
    const first = await fetch(`${daemon.url}${prefix}/headers?token=${encodeURIComponent(ALICE)}&x=1`, { redirect: 'manual' });
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe(`${prefix}/headers?x=1`);
    const cookie = first.headers.get('set-cookie') ?? '';
    expect(cookie).toContain(`execworld_preview=${ALICE}`);
    expect(cookie).toContain(`Path=${prefix}`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Lax');
    const next = await fetch(`${daemon.url}${prefix}/headers?x=1`, { headers: { cookie: cookie.split(';')[0]! } });
    expect(next.status).toBe(200);
    expect(((await next.json()) as { headers: Record<string, string> }).headers.cookie).toBeUndefined();
    // The port alone is sent to its path with a /, so that the page's relative URLs resolve under the prefix.
    const bare = await fetch(`${daemon.url}${prefix}`, { redirect: 'manual', headers: { authorization: `Bearer ${ALICE}` } });
    expect(bare.status).toBe(303);
    expect(bare.headers.get('location')).toBe(`${prefix}/`);
  });

  test('no token is 401, a read token 403 READ_ONLY, a token scoped to another port 403 TOKEN_SCOPE; one scoped to it passes', async () => {
    const none = await daemon.request('GET', `${prefix}/headers`, { token: null });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('UNAUTHORIZED');
    const reader = await daemon.request('GET', `${prefix}/headers`, { token: ALICE_READER });
    expect(reader.status).toBe(403);
    expect(reader.body.error.code).toBe('READ_ONLY');
    const other = await daemon.request('GET', `${prefix}/headers`, { token: otherScope });
    expect(other.status).toBe(403);
    expect(other.body.error.code).toBe('TOKEN_SCOPE');
    const own = await daemon.request('GET', `${prefix}/headers`, { token: scopedRead });
    expect(own.status).toBe(200);
    // A port-scoped token reaches nothing else of the daemon.
    const sessions = await daemon.request('POST', '/v1/processes', { token: scopedRead, body: { argv: ['/bin/true'] } });
    expect(sessions.status).toBe(403);
  });

  test('a port nothing listens on is 502 PORT_REFUSED; a port out of range is 400', async () => {
    const idle = await daemon.request('GET', `/v1/ports/${idlePort}/`);
    expect(idle.status).toBe(502);
    expect(idle.body.error.code).toBe('PORT_REFUSED');
    expect(idle.body.error.message).toContain(String(idlePort));
    for (const port of ['0', '65536', 'abc', '080']) {
      const bad = await daemon.request('GET', `/v1/ports/${port}/`);
      expect(bad.status, port).toBe(400);
      expect(bad.body.error.code).toBe('INVALID_ARGUMENT');
    }
  });

  test("the app's answer streams: the first chunk of a body that never ends arrives", async () => {
    const aborted = new AbortController();
    const response = await fetch(`${daemon.url}${prefix}/stream`, { headers: { authorization: `Bearer ${ALICE}` }, signal: aborted.signal });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const { value } = await reader.read();
    expect(Buffer.from(value ?? []).toString()).toBe('first chunk\n');
    aborted.abort();
  });

  test('a body streams to the app whatever its type, larger than the JSON body limit', async () => {
    const bytes = 24 * 1024 * 1024;
    const response = await fetch(`${daemon.url}${prefix}/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/octet-stream' },
      body: Buffer.alloc(bytes, 7),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ bytes });
  });

  test('a WebSocket reaches the app, without the daemon cookie, and ending its tunnel closes it', async () => {
    const url = `${daemon.url.replace(/^http/, 'ws')}${prefix}/echo`;
    const socket = new WebSocket(url, { headers: { cookie: `execworld_preview=${encodeURIComponent(ALICE)}; app=3` } });
    const messages: string[] = [];
    socket.on('message', (data: Buffer) => messages.push(data.toString()));
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
    socket.send('hello');
    await waitFor('the echo', () => messages.length > 0);
    expect(messages[0]).toBe('hello cookie=app=3');
    const { tunnels } = daemon.daemon;
    expect(tunnels.size).toBe(1);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    tunnels.closeAll();
    await closed;
    expect(tunnels.size).toBe(0);
    const refusal = (headers: Record<string, string>): Promise<number> => {
      const refused = new WebSocket(url, { headers });
      return new Promise<number>((resolve) => refused.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0)));
    };
    expect(await refusal({})).toBe(401);
    expect(await refusal({ authorization: `Bearer ${ALICE_READER}` })).toBe(403);
    expect(await refusal({ authorization: `Bearer ${otherScope}` })).toBe(403);
  });

  test('the app reaches nothing of the origin beyond its prefix: no wider service worker, no wipe, its cookies under the prefix', async () => {
    const response = await fetch(`${daemon.url}${prefix}/claim`, { headers: { authorization: `Bearer ${ALICE}` } });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('claimed');
    expect(response.headers.get('service-worker-allowed')).toBeNull();
    expect(response.headers.get('clear-site-data')).toBeNull();
    expect(response.headers.getSetCookie()).toEqual([`app=1; Path=${prefix}/`, `deep=2; Path=${prefix}/v1/ui; HttpOnly`, 'plain=3']);
  });

  test("a preview's WebSocket closes when its minted token is revoked, and the token reaches the port no more", async () => {
    const { id, token } = await mintWithId({ access: 'write', port: appPort });
    const socket = new WebSocket(`${daemon.url.replace(/^http/, 'ws')}${prefix}/echo?token=${encodeURIComponent(token)}`);
    const messages: string[] = [];
    socket.on('message', (data: Buffer) => messages.push(data.toString()));
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
    socket.send('before');
    await waitFor('the echo', () => messages.length > 0);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    expect((await daemon.request('DELETE', `/v1/tokens/${id}`)).status).toBe(200);
    await closed;
    const after = await daemon.request('GET', `${prefix}/headers`, { token });
    expect(after.status).toBe(401);
  });

  test("a preview's WebSocket closes when its minted token expires, and the token reaches the port no more", async () => {
    const minted = await daemon.request('POST', '/v1/tokens', { body: { access: 'read', ttlMs: 2000, port: appPort } });
    expect(minted.status).toBe(201);
    const { token, expiresAt } = minted.body as { token: string; expiresAt: string };
    const socket = new WebSocket(`${daemon.url.replace(/^http/, 'ws')}${prefix}/echo?token=${encodeURIComponent(token)}`);
    const messages: string[] = [];
    socket.on('message', (data: Buffer) => messages.push(data.toString()));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
    socket.send('before');
    await waitFor('the echo', () => messages.length > 0);
    expect((await daemon.request('GET', `${prefix}/headers`, { token })).status).toBe(200);
    await closed;
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expiresAt));
    const after = await daemon.request('GET', `${prefix}/headers`, { token });
    expect(after.status).toBe(401);
  });

  test.runIf(process.platform === 'linux')('discovery lists the port the app listens on, its pid and its session; another owner sees none', async () => {
    const listed = await daemon.request('GET', '/v1/ports', { token: ALICE_READER });
    expect(listed.status).toBe(200);
    expect(listed.body.supported).toBe(true);
    expect(listed.body.ports).toContainEqual({ port: appPort, address: '127.0.0.1', pid: appPid, session: appProcess, kind: 'process' });
    expect(listed.body.ports.filter((entry: { port: number }) => entry.port === idlePort)).toEqual([]);
    const bob = await daemon.request('GET', '/v1/ports', { token: BOB });
    expect(bob.body).toEqual({ supported: true, ports: [] });
  });
});
