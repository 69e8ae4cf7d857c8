/**
 * Tokens the daemon mints (issue 34): signed, expiring, scoped and revocable.
 * A write owner mints lesser tokens for itself (token.create), the operator
 * with `execworld token create` and the key in the state directory; an
 * expired, revoked, tampered or wrongly scoped token is refused on REST, the
 * WebSocket and MCP; a live WebSocket whose token is revoked is closed; the
 * signing key is reached by no owner's file call.
 */
import { chmodSync, existsSync, linkSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { ALICE, ALICE_READER, BOB, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { runCli } from '../helpers/cli.ts';
import { McpTestClient } from '../mcp/helpers.ts';
import { waitFor } from '../helpers/wait.ts';
import { METRICS_PATH } from '@execworld/sdk/protocol';
import { parseTokenFile } from '../../service/src/server/auth.ts';
import { loadSigningKey, MINTED_TOKEN_PREFIX } from '../../service/src/server/minted.ts';

const stateDir = mkdtempSync(join(tmpdir(), 'ew-minted-'));
const keyFile = join(stateDir, 'token-key');
/** Where the test's uploads go: outside the state directory, which no file call reaches. */
const scratch = mkdtempSync(join(tmpdir(), 'ew-minted-files-'));
const TERMINAL = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 };
const test = daemonTest({ stateDir, maxTokenTtlMs: 3_600_000 });

let daemon: TestDaemon;
test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});
test.afterAll(() => {
  rmSync(stateDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

/** Mints a token through the API with `token` (alice's by default). */
async function mint(body: Record<string, unknown>, token: string = ALICE): Promise<{ token: string; id: string; expiresAt: string }> {
  const minted = await daemon.request('POST', '/v1/tokens', { body, token });
  expect(minted.status, JSON.stringify(minted.body)).toBe(201);
  return minted.body;
}

/** A JSON-RPC call of MCP's tools/call, posted as a client would, with `token`. */
async function mcpPost(token: string): Promise<Response> {
  return fetch(`${daemon.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
}

/** The close of `socket`, and how long after `since` it came. */
function closeOf(socket: TestSocket, since: () => number): Promise<{ code: number; reason: string; afterMs: number }> {
  return new Promise((resolve) => {
    socket.socket.once('close', (code, reason) => resolve({ code, reason: reason.toString(), afterMs: performance.now() - since() }));
  });
}

async function terminal(token: string = ALICE): Promise<string> {
  const created = await daemon.request('POST', '/v1/terminals', { body: TERMINAL, token });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

describe('the signing key', () => {
  test('is made 0600 in the state directory on the first start', () => {
    expect(existsSync(keyFile)).toBe(true);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
  });

  test('is refused, as a token file would be, when other users may read it', () => {
    const loose = mkdtempSync(join(tmpdir(), 'ew-minted-loose-'));
    try {
      writeFileSync(join(loose, 'token-key'), `${'k'.repeat(43)}\n`, { mode: 0o644 });
      chmodSync(join(loose, 'token-key'), 0o644);
      expect(() => loadSigningKey(loose)).toThrow(/signing key .*token-key: it is readable by other users \(mode 0644\)/);
    } finally {
      rmSync(loose, { recursive: true, force: true });
    }
  });

  test('is read by no owner through the files API, by path or archive, whatever its access', async () => {
    for (const token of [ALICE, ALICE_READER, BOB]) {
      const content = await daemon.request('GET', `/v1/files/content?path=${encodeURIComponent(keyFile)}`, { token });
      expect(content.status, token).toBe(403);
      expect(content.body.error.code).toBe('FS_PERMISSION_DENIED');
      const read = await daemon.request('POST', '/v1/fs/read-text', { body: { path: keyFile }, token });
      expect([403, 404]).toContain(read.status);
      const digest = await daemon.request('POST', '/v1/fs/digest', { body: { path: keyFile }, token });
      expect(digest.status).toBe(403);
      const listing = await daemon.request('POST', '/v1/fs/list', { body: { path: stateDir }, token });
      expect(listing.status).toBe(403);
    }
    // Nor by another name: a symbolic link, and a hard link (the daemon knows the key by its identity too).
    const elsewhere = mkdtempSync(join(tmpdir(), 'ew-minted-links-'));
    try {
      symlinkSync(keyFile, join(elsewhere, 'soft'));
      linkSync(keyFile, join(elsewhere, 'hard'));
      for (const name of ['soft', 'hard']) {
        const content = await daemon.request('GET', `/v1/files/content?path=${encodeURIComponent(join(elsewhere, name))}`);
        expect(content.status, name).toBe(403);
        expect(content.body.error.code).toBe('FS_PERMISSION_DENIED');
      }
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
    // A minted token, of the widest reach, gets no further.
    const { token } = await mint({ access: 'write', ttlMs: 60_000 });
    const content = await daemon.request('GET', `/v1/files/content?path=${encodeURIComponent(keyFile)}`, { token });
    expect(content.status).toBe(403);
  });
});

describe('token.create', () => {
  test('mints a token that stands for its owner, with the access asked, and lists it', async () => {
    const minted = await mint({ access: 'read', ttlMs: 60_000 });
    expect(minted.token.startsWith('ewm1.')).toBe(true);
    // Its identity says it is minted, with its id and expiry; a token of the token file's says nothing of the kind.
    expect(await daemon.request('GET', '/v1/identity', { token: minted.token })).toEqual({
      status: 200,
      body: { owner: 'alice', access: 'read', minted: { id: minted.id, expiresAt: minted.expiresAt } },
    });
    expect(await daemon.request('GET', '/v1/identity')).toEqual({ status: 200, body: { owner: 'alice', access: 'write' } });
    const refused = await daemon.request('POST', '/v1/terminals', { body: TERMINAL, token: minted.token });
    expect(refused.body.error.code).toBe('READ_ONLY');
    const listed = await daemon.request('GET', '/v1/tokens');
    expect(listed.body.tokens).toContainEqual({ id: minted.id, access: 'read', expiresAt: minted.expiresAt });
    // Bob's list holds none of alice's.
    expect((await daemon.request('GET', '/v1/tokens', { token: BOB })).body.tokens).not.toContainEqual(expect.objectContaining({ id: minted.id }));
  });

  test('refuses bad input with 400 naming the field, a reader with READ_ONLY, and a minted token with TOKEN_SCOPE', async () => {
    for (const [body, field] of [
      [{ access: 'write', ttlMs: 3_600_001 }, 'ttlMs'],
      [{ access: 'write', ttlMs: 0 }, 'ttlMs'],
      [{ access: 'admin', ttlMs: 1000 }, 'access'],
      [{ access: 'read', ttlMs: 1000, port: 70_000 }, 'port'],
      [{ access: 'read', ttlMs: 1000, port: 80, session: 't_x' }, 'port and session'],
    ] as const) {
      const refused = await daemon.request('POST', '/v1/tokens', { body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error.code).toBe('INVALID_ARGUMENT');
      expect(refused.body.error.message).toContain(field);
    }
    expect((await daemon.request('POST', '/v1/tokens', { body: { access: 'read', ttlMs: 1000 }, token: ALICE_READER })).body.error.code).toBe('READ_ONLY');
    // Nor does a reader list them: the tokens an owner handed on are the owner's business, not a watcher's.
    expect((await daemon.request('GET', '/v1/tokens', { token: ALICE_READER })).body.error.code).toBe('READ_ONLY');
    const minted = await mint({ access: 'write', ttlMs: 60_000 });
    const again = await daemon.request('POST', '/v1/tokens', { body: { access: 'read', ttlMs: 1000 }, token: minted.token });
    expect(again.status).toBe(403);
    expect(again.body.error.code).toBe('TOKEN_SCOPE');
  });
});

describe('an expired token', () => {
  test('is refused with 401 on REST, the WebSocket and MCP, and its live WebSocket is closed', async () => {
    const minted = await mint({ access: 'write', ttlMs: 1500 });
    const socket = await TestSocket.open(daemon.wsUrl, { token: minted.token });
    const opened = performance.now();
    const closed = closeOf(socket, () => opened);
    await waitFor('the token to expire', () => Date.parse(minted.expiresAt) < Date.now(), 10_000);
    const rest = await daemon.request('GET', '/v1/identity', { token: minted.token });
    expect(rest).toEqual({ status: 401, body: { error: { code: 'UNAUTHORIZED', message: 'the token expired' } } });
    await expect(TestSocket.open(daemon.wsUrl, { token: minted.token })).rejects.toMatchObject({ status: 401 });
    expect((await mcpPost(minted.token)).status).toBe(401);
    const close = await closed;
    expect(close).toMatchObject({ code: 1008, reason: 'the token expired' });
  });
});

describe('a revoked token', () => {
  test('is refused with 401 on REST, the WebSocket and MCP; its live WebSocket closes with the reason', async () => {
    const minted = await mint({ access: 'write', ttlMs: 600_000 });
    const socket = await TestSocket.open(daemon.wsUrl, { token: minted.token });
    await expect(socket.call('identity.get')).resolves.toEqual({ owner: 'alice', access: 'write', minted: { id: minted.id, expiresAt: minted.expiresAt } });
    let revokedAt = 0;
    const closed = closeOf(socket, () => revokedAt);
    revokedAt = performance.now();
    expect(await daemon.request('DELETE', `/v1/tokens/${minted.id}`)).toEqual({ status: 200, body: { ok: true } });
    const close = await closed;
    console.log(`a WebSocket of a token revoked through the API closed ${close.afterMs.toFixed(1)} ms after the revoke was sent`);
    expect(close).toMatchObject({ code: 1008, reason: 'the token was revoked' });
    expect(await daemon.request('GET', '/v1/identity', { token: minted.token })).toEqual({
      status: 401,
      body: { error: { code: 'UNAUTHORIZED', message: 'the token was revoked' } },
    });
    await expect(TestSocket.open(daemon.wsUrl, { token: minted.token })).rejects.toMatchObject({ status: 401 });
    expect((await mcpPost(minted.token)).status).toBe(401);
    expect((await daemon.request('GET', '/v1/tokens')).body.tokens).not.toContainEqual(expect.objectContaining({ id: minted.id }));
    // Recorded in the state directory, where the next start finds it.
    expect(readdirSync(join(stateDir, 'revoked'))).toContain(minted.id);
  });

  test("cuts a download under way, a file's content and a directory's archive, where it ran to its end", async () => {
    const directory = mkdtempSync(join(scratch, 'download-'));
    const size = 64 * 1024 * 1024;
    const file = join(directory, 'big.bin');
    writeFileSync(file, Buffer.alloc(size, 1));
    for (const path of [`/v1/files/content?path=${encodeURIComponent(file)}`, `/v1/files/archive?path=${encodeURIComponent(directory)}`]) {
      const minted = await mint({ access: 'read', ttlMs: 600_000 });
      const response = await fetch(`${daemon.url}${path}`, { headers: { authorization: `Bearer ${minted.token}` } });
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      let received = (await reader.read()).value?.length ?? 0;
      // The answer holds its token while it streams; the client reads no more until the revoke.
      await waitFor('the download to hold its token', () => daemon.daemon.grants.held > 0);
      expect(await daemon.request('DELETE', `/v1/tokens/${minted.id}`)).toEqual({ status: 200, body: { ok: true } });
      const outcome = await (async () => {
        try {
          for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += chunk.value.length;
          return 'ended';
        } catch (_error) {
          return 'cut';
        }
      })();
      expect([path.split('?')[0], outcome]).toEqual([path.split('?')[0], 'cut']);
      expect(received).toBeLessThan(size);
      expect(daemon.daemon.grants.held).toBe(0);
    }
  });

  test('ends a call that waits with 401', async () => {
    const id = await terminal();
    const minted = await mint({ access: 'read', ttlMs: 600_000 });
    const waiting = daemon.request('GET', `/v1/terminals/${id}/done?timeoutMs=60000`, { token: minted.token });
    // The wait is held (its grant is taken) before the revoke.
    await waitFor('the wait to hold its token', () => daemon.daemon.grants.held > 0);
    const started = performance.now();
    expect((await daemon.request('DELETE', `/v1/tokens/${minted.id}`)).status).toBe(200);
    const answer = await waiting;
    console.log(`a long poll of a revoked token answered ${(performance.now() - started).toFixed(1)} ms after the revoke was sent`);
    expect(answer).toEqual({ status: 401, body: { error: { code: 'UNAUTHORIZED', message: 'the token was revoked' } } });
  });

  test("ends an upload's stream of bytes with 401", async () => {
    const minted = await mint({ access: 'write', ttlMs: 600_000 });
    const target = join(scratch, 'file.bin');
    const upload = await daemon.request('POST', '/v1/files/uploads', { body: { path: target }, token: minted.token });
    expect(upload.status).toBe(201);
    // A body that starts and never ends: the upload waits for the rest of it.
    const { hostname, port } = new URL(daemon.url);
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const sending = request(
        {
          host: hostname,
          port,
          method: 'PUT',
          path: `/v1/files/uploads/${upload.body.id}?offset=0`,
          headers: { authorization: `Bearer ${minted.token}`, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
        },
        (response) => {
          let body = '';
          response.on('data', (chunk: Buffer) => (body += chunk.toString()));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        },
      );
      sending.on('error', reject);
      sending.write(Buffer.alloc(64 * 1024, 1));
    });
    await waitFor('the upload to hold its token', () => daemon.daemon.grants.held > 0);
    expect((await daemon.request('DELETE', `/v1/tokens/${minted.id}`)).status).toBe(200);
    const refused = await answer;
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body)).toEqual({ error: { code: 'UNAUTHORIZED', message: 'the token was revoked' } });
  });

  test('stays revoked for the next daemon on the state directory', async ({ startDaemon }) => {
    const minted = await mint({ access: 'read', ttlMs: 600_000 });
    const kept = await mint({ access: 'read', ttlMs: 600_000 });
    expect((await daemon.request('DELETE', `/v1/tokens/${minted.id}`)).status).toBe(200);
    const next = await startDaemon({ stateDir });
    expect((await next.request('GET', '/v1/identity', { token: minted.token })).status).toBe(401);
    expect((await next.request('GET', '/v1/identity', { token: kept.token })).status).toBe(200);
  });

  test('is forgotten once it expired: the list of revocations holds no token that could no longer be used', async () => {
    const minted = await mint({ access: 'read', ttlMs: 1500 });
    expect((await daemon.request('DELETE', `/v1/tokens/${minted.id}`)).status).toBe(200);
    expect(readdirSync(join(stateDir, 'revoked'))).toContain(minted.id);
    await waitFor('the token to expire', () => Date.parse(minted.expiresAt) < Date.now(), 10_000);
    // A list drops what expired, as the daemon's own minute's sweep does.
    await daemon.request('GET', '/v1/tokens');
    expect(readdirSync(join(stateDir, 'revoked'))).not.toContain(minted.id);
    expect((await daemon.request('GET', '/v1/identity', { token: minted.token })).body.error.message).toBe('the token expired');
  });

  test("is only its owner's to revoke", async () => {
    const minted = await mint({ access: 'write', ttlMs: 600_000 });
    expect((await daemon.request('DELETE', `/v1/tokens/${minted.id}`, { token: BOB })).status).toBe(404);
    expect((await daemon.request('GET', '/v1/identity', { token: minted.token })).status).toBe(200);
  });
});

describe('a tampered token', () => {
  test('is refused with 401 whichever byte of its payload or signature changed', async () => {
    const { token } = await mint({ access: 'read', ttlMs: 600_000 });
    const [prefix, payload, signature] = token.split('.') as [string, string, string];
    const flip = (text: string, at: number): string => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    // The claims a holder would want (write, where it was minted read), under the old signature.
    const widened = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), access: 'write' })).toString('base64url');
    for (const tampered of [
      `${prefix}.${flip(payload, 3)}.${signature}`,
      `${prefix}.${flip(payload, payload.length - 2)}.${signature}`,
      `${prefix}.${payload}.${flip(signature, 0)}`,
      `${prefix}.${payload}.${flip(signature, 20)}`,
      `${prefix}.${widened}.${signature}`,
      `${prefix}.${payload}.`,
      `${prefix}.${payload}`,
    ]) {
      const refused = await daemon.request('GET', '/v1/identity', { token: tampered });
      expect(refused, tampered).toEqual({ status: 401, body: { error: { code: 'UNAUTHORIZED', message: 'the bearer token is not valid' } } });
    }
    expect((await daemon.request('GET', '/v1/identity', { token })).status).toBe(200);
  });
});

describe('a session-scoped token', () => {
  test('acts on its session only, on REST, the WebSocket and MCP, and lists only it', async () => {
    const mine = await terminal();
    const other = await terminal();
    const { token, id, expiresAt } = await mint({ access: 'write', ttlMs: 600_000, session: mine });
    expect((await daemon.request('GET', '/v1/identity', { token })).body).toEqual({
      owner: 'alice',
      access: 'write',
      minted: { id, expiresAt, session: mine },
    });
    expect((await daemon.request('GET', `/v1/terminals/${mine}`, { token })).status).toBe(200);
    expect((await daemon.request('POST', `/v1/terminals/${mine}/input`, { body: { data: 'x' }, token })).status).toBe(200);
    const listed = await daemon.request('GET', '/v1/terminals', { token });
    expect(listed.body.terminals.map((each: { id: string }) => each.id)).toEqual([mine]);
    for (const [method, path, body] of [
      ['GET', `/v1/terminals/${other}`, undefined],
      ['POST', `/v1/terminals/${other}/input`, { data: 'x' }],
      ['POST', '/v1/terminals', TERMINAL],
      ['POST', '/v1/fs/stat', { path: '/tmp' }],
      ['GET', '/v1/tokens', undefined],
      ['GET', METRICS_PATH, undefined],
    ] as const) {
      const refused = await daemon.request(method, path, { token, ...(body === undefined ? {} : { body }) });
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(refused.body.error.code).toBe('TOKEN_SCOPE');
    }
    const socket = await TestSocket.open(daemon.wsUrl, { token });
    await expect(socket.call('terminal.get', { id: mine })).resolves.toMatchObject({ id: mine });
    await expect(socket.call('terminal.get', { id: other })).rejects.toMatchObject({ code: 'TOKEN_SCOPE' });
    await expect(socket.subscribe({ target: { kind: 'terminal', id: other, stream: 'output' }, from: 0 })).rejects.toMatchObject({ code: 'TOKEN_SCOPE' });
    await expect(socket.subscribe({ target: { kind: 'terminal', id: mine, stream: 'output' }, from: 0 })).resolves.toMatchObject({ from: 0 });
    socket.close();
    const mcp = await McpTestClient.http(daemon.url, token);
    try {
      expect((await mcp.call('terminal_screen', { terminal: other })).code).toBe('TOKEN_SCOPE');
      expect((await mcp.call('file_read', { path: '/etc/hostname' })).code).toBe('TOKEN_SCOPE');
      expect((await mcp.call('terminal_screen', { terminal: mine })).isError).toBe(false);
    } finally {
      await mcp.client.close();
    }
  });
});

describe('a port-scoped token', () => {
  test('is refused every operation, with TOKEN_SCOPE, on REST, the WebSocket and MCP', async () => {
    const mine = await terminal();
    const { token } = await mint({ access: 'write', ttlMs: 600_000, port: 8080 });
    for (const [method, path] of [
      ['GET', '/v1/identity'],
      ['GET', '/v1/terminals'],
      ['GET', `/v1/terminals/${mine}`],
    ] as const) {
      const refused = await daemon.request(method, path, { token });
      expect(refused.status, path).toBe(403);
      expect(refused.body.error.code).toBe('TOKEN_SCOPE');
    }
    const socket = await TestSocket.open(daemon.wsUrl, { token });
    await expect(socket.call('terminal.list')).rejects.toMatchObject({ code: 'TOKEN_SCOPE' });
    await expect(socket.subscribe({ target: { kind: 'terminal', id: mine, stream: 'output' }, from: 0 })).rejects.toMatchObject({ code: 'TOKEN_SCOPE' });
    socket.close();
    // MCP's tools and tasks are calls: /mcp refuses the token before any of them.
    const mcp = await fetch(`${daemon.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'session_list', arguments: {} } }),
    });
    expect(mcp.status).toBe(403);
    expect(((await mcp.json()) as { error: { code: string } }).error.code).toBe('TOKEN_SCOPE');
    await expect(McpTestClient.http(daemon.url, token)).rejects.toThrow(/403|TOKEN_SCOPE/);
  });
});

describe('the token file', () => {
  test('may hold no token of the minted shape, which could be taken for either', () => {
    expect(() => parseTokenFile(`alice ${MINTED_TOKEN_PREFIX}Zq8xK2pL7vR4nW9mT3bY\n`, '/tokens')).toThrow(/line 1: a token may not begin with ewm1\./);
  });
});

describe('execworld token', () => {
  test('create mints a token with the key in the state directory; revoke closes its live WebSocket', async () => {
    const env = { ...process.env, EXECWORLD_STATE_DIR: stateDir };
    const created = await runCli(['token', 'create', '--owner', 'bob', '--access', 'read', '--ttl', '15m'], { env });
    expect(created.code, created.stderr).toBe(0);
    const token = created.stdout.trim();
    const id = /token (\S+) of owner bob \(read\)/.exec(created.stderr)?.[1];
    expect(id).toBeDefined();
    const identity = { owner: 'bob', access: 'read', minted: { id, expiresAt: expect.any(String) } };
    expect(await daemon.request('GET', '/v1/identity', { token })).toEqual({ status: 200, body: identity });
    const socket = await TestSocket.open(daemon.wsUrl, { token });
    await expect(socket.call('identity.get')).resolves.toEqual(identity);
    let revokedAt = 0;
    const closed = closeOf(socket, () => revokedAt);
    const revoking = runCli(['token', 'revoke', id!], { env });
    // Timed from the revocation's file, once the command (a node process, slow to start) wrote it.
    await waitFor('the revocation to be recorded', () => existsSync(join(stateDir, 'revoked', id!)), 30_000);
    revokedAt = performance.now();
    const close = await closed;
    console.log(`a WebSocket of a token revoked by execworld token revoke closed ${close.afterMs.toFixed(1)} ms after the revocation was recorded`);
    const revoked = await revoking;
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(close).toMatchObject({ code: 1008, reason: 'the token was revoked' });
    expect((await daemon.request('GET', '/v1/identity', { token })).status).toBe(401);
    // Two commands, each a node process, which start slowly on a loaded machine.
  }, 120_000);

  test('mints no token of an owner the token file does not name that the daemon takes', async () => {
    const env = { ...process.env, EXECWORLD_STATE_DIR: stateDir };
    const created = await runCli(['token', 'create', '--owner', 'mallory', '--access', 'write', '--ttl', '1h'], { env });
    expect(created.code).toBe(0);
    const refused = await daemon.request('GET', '/v1/identity', { token: created.stdout.trim() });
    expect(refused.status).toBe(401);
    expect(refused.body.error.message).toContain('mallory');
  });

  test('refuses a bad command line with status 2', async () => {
    const env = { ...process.env, EXECWORLD_STATE_DIR: stateDir };
    for (const [args, said] of [
      [['token', 'create', '--owner', 'bob', '--access', 'all', '--ttl', '1h'], '--access must be read or write'],
      [['token', 'create', '--owner', 'bob', '--access', 'read', '--ttl', '15 minutes'], '--ttl must be'],
      [['token', 'create', '--owner', 'bob', '--access', 'read'], 'needs --ttl'],
      [['token', 'create', '--owner', 'bob', '--access', 'read', '--ttl', '1h', '--port', '80', '--session', 't_x'], 'not both'],
      [['token', 'revoke'], 'missing <id|token>'],
      [['token', 'mint'], 'unknown action mint'],
    ] as const) {
      const result = await runCli(args, { env });
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr).toContain(said);
    }
  });
});
