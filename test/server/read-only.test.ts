/**
 * Read-only tokens (`access=read` in the token file): a reader of alice's
 * sees her sessions and files, over REST and the WebSocket, and follows their
 * output; every call that would act is refused with READ_ONLY and changes
 * nothing; a reader of alice's sees nothing of bob's. identity.get tells each
 * token who it is and what it may do.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { METRICS_PATH } from '@execworld/sdk/protocol';
import { ALICE, ALICE_READER, BOB, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';

const TERMINAL = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 };
const PROCESS = { argv: ['/bin/cat'], cwd: '/tmp', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' }, graceMs: 500 };
const READ_ONLY = { status: 403, body: { error: { code: 'READ_ONLY', message: expect.stringContaining('may only read') } } };

let daemon: TestDaemon;
const scratch = mkdtempSync(join(tmpdir(), 'read-only-'));
const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});
test.afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** The text of a terminal's output so far, as alice reads it. */
async function outputOf(id: string): Promise<string> {
  const read = await daemon.request('GET', `/v1/terminals/${id}/output?from=0`);
  return Buffer.from(read.body.data as string, 'base64').toString('utf8');
}

describe('identity.get', () => {
  test('answers the owner and access of each token, over REST and the WebSocket', async () => {
    for (const [token, identity] of [
      [ALICE, { owner: 'alice', access: 'write' }],
      [ALICE_READER, { owner: 'alice', access: 'read' }],
      [BOB, { owner: 'bob', access: 'write' }],
    ] as const) {
      expect(await daemon.request('GET', '/v1/identity', { token })).toEqual({ status: 200, body: identity });
      const socket = await TestSocket.open(daemon.wsUrl, { token });
      await expect(socket.call('identity.get')).resolves.toEqual(identity);
      socket.close();
    }
    expect((await daemon.request('GET', '/v1/identity', { token: null })).status).toBe(401);
  });
});

describe('a read-only token', () => {
  test("lists, inspects and follows alice's terminal over REST and the WebSocket", async () => {
    const created = await daemon.request('POST', '/v1/terminals', { body: TERMINAL });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    try {
      const listed = await daemon.request('GET', '/v1/terminals', { token: ALICE_READER });
      expect(listed.status).toBe(200);
      expect(listed.body.terminals.map((terminal: { id: string }) => terminal.id)).toContain(id);
      expect(await daemon.request('GET', `/v1/terminals/${id}`, { token: ALICE_READER })).toMatchObject({ status: 200, body: { id, status: 'running' } });
      expect(await daemon.request('GET', `/v1/terminals/${id}/screen`, { token: ALICE_READER })).toMatchObject({ status: 200, body: { rows: 24, cols: 80 } });

      const reader = await TestSocket.open(daemon.wsUrl, { token: ALICE_READER });
      const terminals = (await reader.call('terminal.list')) as { terminals: { id: string }[] };
      expect(terminals.terminals.map((terminal) => terminal.id)).toContain(id);
      await expect(reader.call('terminal.get', { id })).resolves.toMatchObject({ id });
      await expect(reader.call('terminal.screen', { id })).resolves.toMatchObject({ rows: 24, cols: 80 });
      const { sub } = await reader.subscribe({ target: { kind: 'terminal', id, stream: 'output' }, from: 0 });
      // What alice types, the reader sees.
      expect((await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'watched-line\r' } })).status).toBe(200);
      await reader.until('the typed line on the reader subscription', () => reader.bytes(sub).toString('utf8').includes('watched-line') || undefined);
      reader.close();
    } finally {
      await daemon.request('DELETE', `/v1/terminals/${id}`);
    }
  });

  test('may not create, type, signal, resize or end anything, over REST or the WebSocket, and nothing changes', async () => {
    const id = (await daemon.request('POST', '/v1/terminals', { body: TERMINAL })).body.id as string;
    const process = (await daemon.request('POST', '/v1/processes', { body: PROCESS })).body.id as string;
    try {
      const before = (await daemon.request('GET', '/v1/terminals')).body.terminals.length as number;
      const refused: [string, string, Record<string, unknown>?][] = [
        ['POST', '/v1/terminals', TERMINAL],
        ['POST', `/v1/terminals/${id}/input`, { data: 'rest-refused\r' }],
        ['POST', `/v1/terminals/${id}/resize`, { rows: 10, cols: 10 }],
        ['POST', `/v1/terminals/${id}/signal`, { signal: 'SIGINT' }],
        ['POST', `/v1/terminals/${id}/terminate`, {}],
        ['DELETE', `/v1/terminals/${id}`],
        ['POST', '/v1/processes', PROCESS],
        ['POST', `/v1/processes/${process}/stdin`, { data: 'x' }],
        ['POST', `/v1/processes/${process}/stdin/close`, {}],
        ['POST', '/v1/shells', { cwd: '/tmp' }],
      ];
      for (const [method, path, body] of refused) {
        expect(await daemon.request(method, path, { token: ALICE_READER, ...(body === undefined ? {} : { body }) }), `${method} ${path}`).toEqual(READ_ONLY);
      }
      const reader = await TestSocket.open(daemon.wsUrl, { token: ALICE_READER });
      for (const [op, params] of [
        ['terminal.create', TERMINAL],
        ['terminal.input', { id, data: 'ws-refused\r' }],
        ['terminal.resize', { id, rows: 10, cols: 10 }],
        ['terminal.terminate', { id }],
        ['process.stdin', { id: process, data: 'x' }],
        ['process.delete', { id: process }],
        ['shell.create', { cwd: '/tmp' }],
      ] as const) {
        await expect(reader.call(op, params), op).rejects.toMatchObject({ code: 'READ_ONLY' });
      }
      reader.close();

      // Nothing was made, typed or ended: alice's own line arrives, the refused ones never did.
      expect((await daemon.request('GET', '/v1/terminals')).body.terminals).toHaveLength(before);
      expect((await daemon.request('GET', '/v1/shells')).body.shells).toEqual([]);
      expect(await daemon.request('GET', `/v1/terminals/${id}`)).toMatchObject({ body: { status: 'running', rows: 24, cols: 80 } });
      expect(await daemon.request('GET', `/v1/processes/${process}`)).toMatchObject({ body: { status: 'running', stdinOpen: true } });
      expect((await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'alice-line\r' } })).status).toBe(200);
      await waitFor('alice line', async () => (await outputOf(id)).includes('alice-line'));
      const output = await outputOf(id);
      expect(output).not.toContain('rest-refused');
      expect(output).not.toContain('ws-refused');
    } finally {
      await daemon.request('DELETE', `/v1/terminals/${id}`);
      await daemon.request('DELETE', `/v1/processes/${process}`);
    }
  });

  test('reads files and downloads, and may not write, upload or unpack', async () => {
    const file = join(scratch, 'notes.txt');
    writeFileSync(file, 'alpha\n');
    expect(await daemon.request('POST', '/v1/fs/read-text', { token: ALICE_READER, body: { path: file } })).toMatchObject({
      status: 200,
      body: { text: 'alpha\n' },
    });
    const content = await fetch(`${daemon.url}/v1/files/content?path=${encodeURIComponent(file)}`, { headers: { authorization: `Bearer ${ALICE_READER}` } });
    expect(content.status).toBe(200);
    expect(await content.text()).toBe('alpha\n');
    const packed = await fetch(`${daemon.url}/v1/files/archive?path=${encodeURIComponent(scratch)}`, { headers: { authorization: `Bearer ${ALICE_READER}` } });
    expect(packed.status).toBe(200);
    await packed.arrayBuffer();

    const written = join(scratch, 'written.txt');
    expect(await daemon.request('POST', '/v1/fs/write-text', { token: ALICE_READER, body: { path: written, content: 'x' } })).toEqual(READ_ONLY);
    expect(
      await daemon.request('POST', '/v1/fs/edit-text', { token: ALICE_READER, body: { path: file, edit: { oldString: 'alpha', newString: 'beta' } } }),
    ).toEqual(READ_ONLY);
    expect(await daemon.request('POST', '/v1/fs/remove', { token: ALICE_READER, body: { path: file } })).toEqual(READ_ONLY);
    expect(await daemon.request('POST', '/v1/files/uploads', { token: ALICE_READER, body: { path: written } })).toEqual(READ_ONLY);
    // An upload of alice's: the reader may ask how far it got, not add to it or end it.
    const upload = (await daemon.request('POST', '/v1/files/uploads', { body: { path: written } })).body.id as string;
    expect(await daemon.request('GET', `/v1/files/uploads/${upload}`, { token: ALICE_READER })).toMatchObject({ status: 200, body: { offset: 0 } });
    const appended = await fetch(`${daemon.url}/v1/files/uploads/${upload}?offset=0`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ALICE_READER}`, 'content-type': 'application/octet-stream' },
      body: 'x',
    });
    expect({ status: appended.status, body: await appended.json() }).toEqual(READ_ONLY);
    expect(await daemon.request('POST', `/v1/files/uploads/${upload}/complete`, { token: ALICE_READER, body: {} })).toEqual(READ_ONLY);
    expect(await daemon.request('DELETE', `/v1/files/uploads/${upload}`, { token: ALICE_READER })).toEqual(READ_ONLY);
    expect(await daemon.request('GET', `/v1/files/uploads/${upload}`)).toMatchObject({ status: 200, body: { offset: 0 } });
    const unpacked = await fetch(`${daemon.url}/v1/files/archive?path=${encodeURIComponent(join(scratch, 'unpacked'))}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ALICE_READER}`, 'content-type': 'application/x-tar' },
      body: Buffer.alloc(1024),
    });
    expect({ status: unpacked.status, body: await unpacked.json() }).toEqual(READ_ONLY);

    const reader = await TestSocket.open(daemon.wsUrl, { token: ALICE_READER });
    await expect(reader.call('fs.readText', { path: file })).resolves.toEqual({ text: 'alpha\n' });
    await expect(reader.call('fs.writeText', { path: written, content: 'x' })).rejects.toMatchObject({ code: 'READ_ONLY' });
    await expect(reader.call('fs.mkdir', { path: join(scratch, 'made') })).rejects.toMatchObject({ code: 'READ_ONLY' });
    reader.close();

    expect(readFileSync(file, 'utf8')).toBe('alpha\n');
    for (const path of [written, join(scratch, 'made'), join(scratch, 'unpacked')]) expect(existsSync(path), path).toBe(false);
    await daemon.request('DELETE', `/v1/files/uploads/${upload}`);
  });

  test("does not keep an upload of alice's alive by asking for its offset: it is discarded once idle, read or not", async ({ startDaemon }) => {
    const idleMs = 1500;
    const short = await startDaemon({ uploadIdleMs: idleMs });
    const created = await short.request('POST', '/v1/files/uploads', { body: { path: join(scratch, 'idle.bin') } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    // The reader asks far more often than the idle time; only alice's writes count as use.
    let asked = 0;
    await waitFor(
      'the idle upload to be discarded while a reader asks for it',
      async () => {
        const got = await short.request('GET', `/v1/files/uploads/${id}`, { token: ALICE_READER });
        asked += 1;
        if (got.status === 200) {
          await new Promise((resolve) => setTimeout(resolve, idleMs / 10));
          return false;
        }
        expect(got).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
        return true;
      },
      20_000,
    );
    expect(asked).toBeGreaterThan(1);
  });

  test("never frees ring room: a program its owner's readers hold paused stays paused while a reader takes every byte", async ({ startDaemon }) => {
    const small = await startDaemon({ ringBytes: 64 * 1024 });
    const created = await small.request('POST', '/v1/processes', {
      body: { ...PROCESS, argv: ['/bin/sh', '-c', 'head -c 1000000 /dev/zero'], stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const end = async (): Promise<number> => (await small.request('GET', `/v1/processes/${id}`)).body.stdout.end as number;
    try {
      // Paused: the end no longer moves.
      let last = -1;
      await waitFor('the full ring to pause the program', async () => {
        const now = await end();
        const paused = now === last && now >= 64 * 1024;
        last = now;
        if (!paused) await new Promise((resolve) => setTimeout(resolve, 100));
        return paused;
      });
      // The reader takes every retained byte, by long polls and by a subscription it acknowledges in full.
      let from = 0;
      while (from < last) {
        const read = await small.request('GET', `/v1/processes/${id}/output/stdout?from=${from}`, { token: ALICE_READER });
        expect(read.status).toBe(200);
        from = read.body.next as number;
      }
      const reader = await TestSocket.open(small.wsUrl, { token: ALICE_READER });
      const { sub } = await reader.subscribe({ target: { kind: 'process', id, stream: 'stdout' }, from: 0 });
      await reader.until('every retained byte', () => reader.bytes(sub).length === last || undefined);
      reader.send({ t: 'ack', sub, offset: last });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await end()).toBe(last);
      reader.close();
      // alice's own read frees the room, and the program goes on.
      expect((await small.request('GET', `/v1/processes/${id}/output/stdout?from=${last}`)).status).toBe(200);
      await waitFor('the program to go on', async () => (await end()) > last);
    } finally {
      await small.request('DELETE', `/v1/processes/${id}`);
      await small.close();
    }
  });

  test("sees nothing of bob's", async () => {
    const id = (await daemon.request('POST', '/v1/terminals', { token: BOB, body: TERMINAL })).body.id as string;
    try {
      expect((await daemon.request('GET', '/v1/terminals', { token: ALICE_READER })).body.terminals.map((t: { id: string }) => t.id)).not.toContain(id);
      for (const path of [`/v1/terminals/${id}`, `/v1/terminals/${id}/screen`, `/v1/terminals/${id}/output`]) {
        expect(await daemon.request('GET', path, { token: ALICE_READER }), path).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
      }
      const reader = await TestSocket.open(daemon.wsUrl, { token: ALICE_READER });
      await expect(reader.call('terminal.get', { id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(reader.subscribe({ target: { kind: 'terminal', id, stream: 'output' }, from: 0 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      reader.close();
    } finally {
      await daemon.request('DELETE', `/v1/terminals/${id}`, { token: BOB });
    }
  });

  test('reads the metrics, and an unknown path is as unknown to it as to any token', async () => {
    expect((await daemon.request('GET', METRICS_PATH, { token: ALICE_READER })).status).toBe(200);
    expect(await daemon.request('POST', '/v1/nothing-here', { token: ALICE_READER, body: {} })).toMatchObject({
      status: 404,
      body: { error: { code: 'NOT_FOUND' } },
    });
  });
});
