/**
 * The HTTP requests an owner has in flight are bounded (--max-requests): past
 * the bound its next request is refused with LIMIT_EXCEEDED, whatever it asks,
 * until one is answered. A long poll counts while it waits, a download until
 * its last byte is sent (or its connection is cut); the owner's read-only
 * tokens, the tokens it minted, its previews (their requests and WebSockets),
 * and other owners have budgets of their own.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { WebSocket } from 'ws';
import { ALICE, ALICE_READER, BOB, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { freePort, startPreviewApp } from '../helpers/preview-app.ts';
import { waitFor } from '../helpers/wait.ts';

const LIMIT = 2;
let daemon: TestDaemon;
const test = daemonTest({ maxRequestsPerOwner: LIMIT });

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

const dir = mkdtempSync(join(tmpdir(), 'execworld-requests-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A GET of `path` with `token` whose answer is not read: it stays in flight while the daemon cannot send it all. */
function heldGet(path: string, token: string): Promise<{ request: ClientRequest; response: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${daemon.url}${path}`, { headers: { authorization: `Bearer ${token}` } }, (response) => {
      response.pause();
      resolve({ request, response });
    });
    request.on('error', reject);
    request.end();
  });
}

/** Whether alice's tokens of `token`'s access are at their bound now: a listing is refused as over it. */
async function refusedNow(token = ALICE): Promise<boolean> {
  const answer = await daemon.request('GET', '/v1/terminals', { token });
  if (answer.status === 200) return false;
  expect(answer.status).toBe(429);
  expect(answer.body.error.code).toBe('LIMIT_EXCEEDED');
  return true;
}

describe('the HTTP requests an owner has in flight', () => {
  test('are refused past the bound while long polls wait, the read-only tokens and other owners aside, and taken again once they are answered', async () => {
    const created = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/sleep', '600'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const waits = Array.from({ length: LIMIT }, () => daemon.request('GET', `/v1/terminals/${id}/done?timeoutMs=60000`));
    await waitFor('both waits to be in flight', () => refusedNow());
    const refused = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/true'], cwd: '/tmp', rows: 24, cols: 80 } });
    expect(refused.status).toBe(429);
    expect(refused.body.error.message).toBe(`the tokens of owner alice already have ${LIMIT} HTTP requests in flight (the limit); retry once one is answered`);
    // Nothing was started for the refused create.
    expect((await daemon.request('GET', '/v1/terminals', { token: ALICE_READER })).body.terminals).toHaveLength(1);
    // Budgets of their own: alice's read-only tokens, and bob.
    expect(await refusedNow(ALICE_READER)).toBe(false);
    expect((await daemon.request('GET', '/v1/terminals', { token: BOB })).status).toBe(200);

    // Over the bound, REST cannot end the terminal; the owner's WebSocket, counted among its connections, can.
    expect((await daemon.request('DELETE', `/v1/terminals/${id}`)).status).toBe(429);
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    try {
      await socket.call('terminal.delete', { id });
    } finally {
      socket.close();
    }
    // Answered, the waits give their places back: as many as the bound are taken at once again.
    for (const wait of await Promise.all(waits)) expect(wait.status).toBe(200);
    await waitFor('the places to be given back', async () => {
      const both = await Promise.all(Array.from({ length: LIMIT }, () => daemon.request('GET', '/v1/terminals')));
      return both.every((answer) => answer.status === 200);
    });
  });

  test('are counted apart for the tokens the owner minted: what holds one never locks the owner out', async () => {
    const minted = await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 60_000 } });
    expect(minted.status).toBe(201);
    const token = minted.body.token as string;
    const created = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/sleep', '600'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const waits = Array.from({ length: LIMIT }, () => daemon.request('GET', `/v1/terminals/${id}/done?timeoutMs=60000`, { token }));
    await waitFor("the minted token's waits to be in flight", () => refusedNow(token));
    const refused = await daemon.request('GET', '/v1/terminals', { token });
    expect(refused.body.error.message).toBe(
      `the minted tokens of owner alice already have ${LIMIT} HTTP requests in flight (the limit); retry once one is answered`,
    );
    // The token file's tokens are served.
    expect(await refusedNow()).toBe(false);
    // Revoked, the token's waits end, and its budget is free for the next one minted.
    expect((await daemon.request('DELETE', `/v1/tokens/${minted.body.id as string}`)).status).toBe(200);
    for (const wait of await Promise.all(waits)) expect(wait.status).toBe(401);
    const next = await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 60_000 } });
    expect(await refusedNow(next.body.token as string)).toBe(false);
    expect((await daemon.request('DELETE', `/v1/terminals/${id}`)).status).toBe(200);
  });

  test('count a download until its last byte is sent, or its connection is cut', async () => {
    // More than the sockets' buffers hold: unread, the download cannot be sent to its end.
    const file = join(dir, 'large.bin');
    writeFileSync(file, Buffer.alloc(64 * 1024 * 1024, 7));
    const path = `/v1/files/content?path=${encodeURIComponent(file)}`;
    const downloads = [];
    for (let index = 0; index < LIMIT; index += 1) downloads.push(await heldGet(path, ALICE));
    for (const { response } of downloads) expect(response.statusCode).toBe(200);
    expect(await refusedNow()).toBe(true);

    // One read to its end: its place is given back once its last byte left.
    const [read, cut] = downloads as [{ response: IncomingMessage }, { request: ClientRequest; response: IncomingMessage }];
    let bytes = 0;
    read.response.on('data', (chunk: Buffer) => (bytes += chunk.length));
    read.response.resume();
    await new Promise((resolve) => read.response.once('end', resolve));
    expect(bytes).toBe(64 * 1024 * 1024);
    await waitFor('the read download to give its place back', async () => !(await refusedNow()));

    // The other cut before its end: its place is given back too.
    const third = await heldGet(path, ALICE);
    expect(await refusedNow()).toBe(true);
    cut.request.destroy();
    third.request.destroy();
    await waitFor('the cut downloads to give their places back', async () => {
      if (await refusedNow()) return false;
      // Both places: two at once are taken.
      const both = await Promise.all([daemon.request('GET', '/v1/terminals'), daemon.request('GET', '/v1/terminals')]);
      return both.every((answer) => answer.status === 200);
    });
  });

  test("count a preview's requests and WebSockets against a budget of their own, its visitors' tokens too", async () => {
    const port = await freePort();
    const app = await startPreviewApp(daemon, port, 30_000);
    const preview = (token = ALICE) => daemon.request('GET', `/v1/ports/${port}/headers`, { token });
    const full = `the previews of owner alice already have ${LIMIT} requests and WebSockets in flight (the limit); retry once one is answered`;
    const minted = await daemon.request('POST', '/v1/tokens', { body: { access: 'read', ttlMs: 60_000, port } });
    expect(minted.status).toBe(201);
    const visitor = minted.body.token as string;
    // Bodies that never end: each stays in flight.
    const streams = [];
    const sockets: WebSocket[] = [];
    try {
      for (let index = 0; index < LIMIT; index += 1) streams.push(await heldGet(`/v1/ports/${port}/stream`, ALICE));
      for (const { response } of streams) expect(response.statusCode).toBe(200);
      // The owner's own calls are not refused: the budgets are apart.
      expect(await refusedNow()).toBe(false);
      for (const token of [ALICE, visitor]) {
        const refused = await preview(token);
        expect(refused.status).toBe(429);
        expect(refused.body.error).toEqual({ code: 'LIMIT_EXCEEDED', message: full });
      }
      // Another owner's previews are not alice's.
      expect((await daemon.request('GET', `/v1/ports/${port}/headers`, { token: BOB })).status).not.toBe(429);

      // A stream cut gives its place back; a WebSocket takes it, and holds it while it is open.
      streams.shift()!.request.destroy();
      await waitFor('the cut stream to give its place back', async () => (await preview()).status === 200);
      const url = `${daemon.url.replace(/^http/, 'ws')}/v1/ports/${port}/echo?token=${encodeURIComponent(visitor)}`;
      const socket = new WebSocket(url);
      sockets.push(socket);
      await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
      const refused = await preview(visitor);
      expect(refused.status).toBe(429);
      expect(refused.body.error.message).toBe(full);
      const second = new WebSocket(url);
      sockets.push(second);
      expect(await new Promise<number>((resolve) => second.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0)))).toBe(429);
      socket.close();
      await waitFor('the closed WebSocket to give its place back', async () => (await preview(visitor)).status === 200);
    } finally {
      for (const socket of sockets) {
        // A refused one has closed already: ending it again is no failure.
        socket.on('error', () => {});
        socket.terminate();
      }
      for (const { request } of streams) request.destroy();
      expect((await daemon.request('DELETE', `/v1/processes/${app.id}`)).status).toBe(200);
    }
  });
});
