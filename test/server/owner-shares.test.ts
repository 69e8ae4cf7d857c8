/**
 * The daemon's byte budgets (request bodies, answers, collected output) are
 * shared by all owners, and each owner holds at most its share of each: one
 * owner that holds all it can leaves another the rest. Each test has alice
 * hold as much as she may, the way a client starving the others would, and
 * then bob's call of the same kind is served.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { ALICE, BOB, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';
import { TEXT_ANSWER_COPIES } from '../../service/src/server/byte-budget.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const STDIN = '/v1/processes/p_unknown0000/stdin';
const LINE = 'a line of text\n';
/** A text file of nearly 8 MiB. */
const LARGE_BYTES = LINE.length * Math.floor((8 * MiB) / LINE.length - 1);

const test = daemonTest();
const directory = mkdtempSync(join(tmpdir(), 'execworld-shares-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** A raw HTTP/1.1 request of `token` on a socket of its own: its headers and the first `sent` bytes of `body`; the answer as it arrives. */
async function rawRequest(
  url: string,
  token: string,
  head: string,
  body: Buffer,
  sent: number,
): Promise<{ socket: Socket; answer: () => string; closed: () => boolean }> {
  const { hostname, port } = new URL(url);
  const socket = netConnect(Number(port), hostname);
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let answer = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  socket.write(`${head}\r\nhost: ${hostname}\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`);
  if (sent > 0) socket.write(body.subarray(0, sent));
  return { socket, answer: () => answer, closed: () => closed };
}

/** A JSON body of `bytes` bytes that writes to a process's stdin. */
const stdinBody = (bytes: number): Buffer => Buffer.from(`{"data":"${'x'.repeat(bytes - 11)}"}`);

describe("one owner's share of the bodies being received", () => {
  test('is half the budget: an owner that holds all the bodies it may leaves another owner room for its own', async ({ startDaemon }) => {
    // A budget of 1 MiB, bodies of at most 256 KiB: each owner holds at most 512 KiB.
    const daemon = await startDaemon({ maxBodyBytes: 256 * KiB, bodyBudgetBytes: MiB });
    const held = (): number => daemon.daemon.bodies.held;
    // Alice sends bodies of 200 KB, 190 KB of each and no more, until the daemon refuses one.
    const slow: Awaited<ReturnType<typeof rawRequest>>[] = [];
    let refusal = '';
    for (let index = 0; index < 8 && refusal === ''; index += 1) {
      const before = held();
      const request = await rawRequest(daemon.url, ALICE, `POST ${STDIN} HTTP/1.1`, stdinBody(200_000), 190_000);
      slow.push(request);
      await waitFor('the body to be held or refused', () => held() >= before + 190_000 || request.answer().includes('}'));
      if (request.answer().includes('}')) refusal = request.answer();
    }
    try {
      expect(refusal).toMatch(/^HTTP\/1\.1 429 /);
      expect(refusal).toContain("the bodies of owner alice's requests being received or handled already hold");
      expect(refusal).toContain("of --body-budget-bytes's 1048576");
      expect(held()).toBeLessThanOrEqual(512 * KiB);
      // Bob's body of 250 KB is read whole and answered: the session it names is unknown, not the budget spent.
      const bob = await daemon.request('POST', STDIN, { token: BOB, raw: stdinBody(250_000).toString(), headers: { 'content-type': 'application/json' } });
      expect(bob).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    } finally {
      for (const request of slow) request.socket.destroy();
    }
    await waitFor('the budget to be free', () => held() === 0);
  });
});

describe("one owner's share of the collect budget", () => {
  test('is half the budget: an owner that reserved its half is refused, another owner creates as much again', async ({ startDaemon }) => {
    // The default budget, 1 GiB: a process collecting the most on both streams (2 × 256 MiB) takes an owner's share.
    const daemon = await startDaemon();
    const collect = { maxBytes: 256 * MiB };
    const process = (token: string, stdout: unknown, stderr: unknown) =>
      daemon.request('POST', '/v1/processes', { token, body: { argv: ['/bin/sleep', '300'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout, stderr } } });
    const first = await process(ALICE, collect, collect);
    expect(first.status).toBe(201);
    const second = await process(ALICE, { maxBytes: MiB }, 'pipe');
    expect(second).toMatchObject({
      status: 429,
      body: {
        error: {
          code: 'LIMIT_EXCEEDED',
          message: expect.stringMatching(
            /^collected output of owner alice's running and retained processes already hold 536870912 of the 536870912 bytes/,
          ) as string,
        },
      },
    });
    const bob = await process(BOB, collect, collect);
    expect(bob.status).toBe(201);
    for (const [token, id] of [
      [ALICE, first.body.id],
      [BOB, bob.body.id],
    ] as const) {
      expect((await daemon.request('DELETE', `/v1/processes/${id as string}`, { token })).status).toBe(200);
    }
    // Ended and forgotten, alice's reservation is hers again.
    await waitFor('alice to create again', async () => (await process(ALICE, { maxBytes: MiB }, 'pipe')).status === 201);
  });
});

describe('the answers being read and sent', () => {
  /** A daemon whose answers may hold 64 MiB, and whose whole-text reads are of at most 8 MiB: one owner holds one such read's 32 MiB. */
  let daemon: TestDaemon;
  const large = join(directory, 'large.txt');

  test("hold a whole-text read's text until it is sent, within the owner's share: a client that never reads refuses its owner's next, not another owner's", async ({
    startDaemon,
  }) => {
    daemon = await startDaemon({ maxReadTextBytes: 8 * MiB, answerBudgetBytes: 64 * MiB });
    const held = (): number => daemon.daemon.answers.held;
    writeFileSync(large, LINE.repeat(LARGE_BYTES / LINE.length));
    const body = Buffer.from(JSON.stringify({ path: large }));
    // Alice asks for the text and reads no more of the answer than its first bytes: more than the sockets
    // between take stays in the daemon.
    const stalled = await rawRequest(daemon.url, ALICE, 'POST /v1/fs/read-text HTTP/1.1', body, body.length);
    stalled.socket.once('data', () => stalled.socket.pause());
    await waitFor('the answer to be sent', () => stalled.answer().startsWith('HTTP/1.1 200 '));
    // Read and answered, the text is held while the answer is sent.
    expect(held()).toBe(TEXT_ANSWER_COPIES * LARGE_BYTES);
    const refused = await daemon.request('POST', '/v1/fs/read-text', { body: { path: large } });
    expect(refused).toMatchObject({
      status: 429,
      body: {
        error: {
          code: 'LIMIT_EXCEEDED',
          message: expect.stringMatching(
            /^the answers to owner alice's calls being read and sent already hold \d+ of the 33554432 bytes one owner may hold of --answer-budget-bytes's 67108864/,
          ) as string,
        },
      },
    });
    // A small file is refused too: the share is spent.
    writeFileSync(join(directory, 'small.txt'), 'small\n');
    expect((await daemon.request('POST', '/v1/fs/read-text', { body: { path: join(directory, 'small.txt') } })).status).toBe(429);
    // Bob reads the whole text.
    const bob = await daemon.request('POST', '/v1/fs/read-text', { token: BOB, body: { path: large } });
    expect(bob.status).toBe(200);
    expect((bob.body as { text: string }).text.length).toBe(LARGE_BYTES);
    // The stalled answer's connection is cut: what it held is given back, and alice reads again.
    stalled.socket.destroy();
    await waitFor('the answer budget to be free', () => held() === 0);
    expect((await daemon.request('POST', '/v1/fs/read-text', { body: { path: join(directory, 'small.txt') } })).body).toEqual({ text: 'small\n' });
  });

  test("hold an MCP tool's text until its answer is sent: a client that never reads keeps it, one that goes gives it back", async ({ startDaemon }) => {
    daemon = await startDaemon({ maxReadTextBytes: 8 * MiB, answerBudgetBytes: 64 * MiB });
    const held = (): number => daemon.daemon.answers.held;
    writeFileSync(large, LINE.repeat(LARGE_BYTES / LINE.length));
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'file_read', arguments: { path: large } } }));
    // The answer carries the text twice (as text and as structured content): far more than the sockets between take.
    const stalled = await rawRequest(daemon.url, ALICE, 'POST /mcp HTTP/1.1\r\naccept: application/json, text/event-stream', body, body.length);
    stalled.socket.once('data', () => stalled.socket.pause());
    await waitFor('the answer to be sent', () => stalled.answer().startsWith('HTTP/1.1 200 '));
    // The tool returned and its answer is being sent: the text it read is held until the answer is.
    expect(held()).toBe(TEXT_ANSWER_COPIES * LARGE_BYTES);
    stalled.socket.destroy();
    await waitFor('the answer budget to be free', () => held() === 0);
  });

  test('read a file that gives no size whole: one of /proc, read within a small part first, then within the most', async ({ daemon: shared }) => {
    // The daemon runs in this process: its smaps is more than the first part of 64 KiB the read sets aside.
    const answer = await shared.request('POST', '/v1/fs/read-text', { body: { path: '/proc/self/smaps' } });
    expect(answer.status).toBe(200);
    const text = (answer.body as { text: string }).text;
    expect(text.length).toBeGreaterThan(64 * KiB);
    expect(text).toMatch(/\nVmFlags:[^\n]*\n$/);
    await waitFor('the answer budget to be free', () => shared.daemon.answers.held === 0);
  });

  test('are given back once sent over a WebSocket, and at once when the call fails', async ({ daemon: shared }) => {
    const socket = await TestSocket.open(shared.wsUrl, { token: ALICE });
    try {
      writeFileSync(join(directory, 'over-ws.txt'), 'over the WebSocket\n');
      expect(await socket.call('fs.readText', { path: join(directory, 'over-ws.txt') })).toEqual({ text: 'over the WebSocket\n' });
      await expect(socket.call('fs.readText', { path: join(directory, 'missing.txt') })).rejects.toMatchObject({ code: 'FS_NOT_FOUND' });
      await waitFor('the answer budget to be free', () => shared.daemon.answers.held === 0);
    } finally {
      socket.close();
    }
  });
});
