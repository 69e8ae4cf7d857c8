/**
 * Every queue the daemon keeps for a client has a bound: a client that sends
 * calls and never reads, pipelined creates, connections, subscriptions, input
 * for a program that does not read, and a request body that never ends.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { WebSocket } from 'ws';
import { connect } from '@execworld/sdk';
import { decodeDataFrame, WS_SUBPROTOCOL } from '@execworld/sdk/protocol';
import { ALICE, ALICE_READER, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
const test = daemonTest({
  maxSessionsPerOwner: 5,
  maxConnectionsPerOwner: 4,
  maxSubscriptionsPerOwner: 3,
  connectionBufferBytes: 256 * 1024,
  inputBacklogBytes: 64 * 1024,
  heartbeatMs: 1000,
});

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

const TERMINAL = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 };

describe('a WebSocket client that sends calls and never reads', () => {
  test("is held back, then disconnected, with the daemon's queue for it bounded", async ({ startDaemon }) => {
    // A daemon of its own, whose heartbeat lets a client that reads nothing live a few seconds: on a busy host the
    // flood below may take more than the shared daemon's second to fill the sockets between, and the client
    // would be gone before the daemon held anything for it. The flood is sent faster than the daemon's message
    // rates: the messages held past them wait for unread answers too.
    const daemon = await startDaemon({ connectionBufferBytes: 256 * 1024, heartbeatMs: 5000 });
    // Answers of a kilobyte or more each: a listing of a few terminals. Made before the connection, whose
    // client reads nothing from its start, so its heartbeat cannot lapse while a busy host starts them.
    const terminals = await Promise.all([1, 2, 3].map(() => daemon.request('POST', '/v1/terminals', { body: TERMINAL })));
    try {
      const socket = new WebSocket(daemon.wsUrl, [WS_SUBPROTOCOL], { headers: { authorization: `Bearer ${ALICE}` } });
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      let closed = false;
      socket.on('close', () => (closed = true));
      // The client stops reading: every answer stays queued on the daemon's side.
      (socket as unknown as { _socket: { pause(): void } })._socket.pause();
      const call = JSON.stringify({ t: 'call', id: 1, op: 'terminal.list', params: {} });
      let peak = 0;
      const sent = async (): Promise<void> => {
        for (let batch = 0; batch < 400 && !closed; batch += 1) {
          for (let index = 0; index < 200; index += 1) socket.send(call);
          // An unsolicited pong must not count as a sign of life.
          socket.pong();
          await new Promise((resolve) => setImmediate(resolve));
          for (const client of daemon.daemon.app.websocketServer.clients) peak = Math.max(peak, client.bufferedAmount);
        }
      };
      await sent();
      // The daemon reads the flood at its message rates, after the loop sent it all: its queue for the client is
      // looked at until it passed the budget, or the client was dropped.
      const until = Date.now() + 60_000;
      while (peak <= 256 * 1024 && daemon.daemon.hub.connections > 0 && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        for (const client of daemon.daemon.app.websocketServer.clients) peak = Math.max(peak, client.bufferedAmount);
      }
      // Held back: past the budget the daemon stops reading its calls, so its queue stops growing.
      expect(peak).toBeGreaterThan(256 * 1024);
      expect(peak).toBeLessThanOrEqual(4 * 256 * 1024 + 64 * 1024);
      // Terminated by the heartbeat or the hard bound, whichever comes first; never left queueing.
      await waitFor('the daemon to drop the client', () => daemon.daemon.hub.connections === 0, 60_000);
      socket.terminate();
    } finally {
      for (const terminal of terminals) await daemon.request('DELETE', `/v1/terminals/${terminal.body.id}`);
    }
  }, 90_000);
});

describe('one connection with many subscriptions of one busy stream', () => {
  test("sends them no more unacknowledged output together than the connection's budget, and health answers through the flood", async ({ startDaemon }) => {
    const budget = 1024 * 1024;
    const subscriptions = 200;
    const flood = await startDaemon({ connectionBufferBytes: budget, ringBytes: budget, maxSubscriptionsPerOwner: 4096 });
    const socket = new WebSocket(flood.wsUrl, [WS_SUBPROTOCOL], { headers: { authorization: `Bearer ${ALICE}` } });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const answers = new Map<number, { t: string; result?: any }>();
    /** Payload bytes received over all subscriptions, and where each subscription has got to. */
    let received = 0;
    const next = new Map<number, number>();
    let acking = false;
    socket.on('message', (raw: Buffer, isBinary: boolean) => {
      if (!isBinary) {
        const message = JSON.parse(raw.toString('utf8')) as { t: string; id?: number };
        if (message.id !== undefined) answers.set(message.id, message);
        return;
      }
      const frame = decodeDataFrame(raw);
      received += frame.payload.length;
      next.set(frame.sub, frame.offset + frame.payload.length);
      if (acking) socket.send(JSON.stringify({ t: 'ack', sub: frame.sub, offset: frame.offset + frame.payload.length }));
    });
    const answered = async (id: number): Promise<{ t: string; result?: any }> => {
      await waitFor(`the answer to message ${id}`, () => answers.has(id), 30_000);
      return answers.get(id)!;
    };
    // A program that writes as fast as its readers let it.
    const created = await flood.request('POST', '/v1/processes', {
      body: { argv: ['/bin/cat', '/dev/zero'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 500 },
    });
    expect(created.status).toBe(201);
    const target = { kind: 'process', id: created.body.id as string, stream: 'stdout' };
    try {
      for (let id = 1; id <= subscriptions; id += 1) socket.send(JSON.stringify({ t: 'subscribe', id, params: { target, from: 0 } }));
      for (let id = 1; id <= subscriptions; id += 1) expect((await answered(id)).t).toBe('result');
      // Nothing is acknowledged yet: each subscription alone could have a window (256 KiB) out, 200 of them 50 MiB.
      await waitFor('the budget to be sent', () => received >= budget, 30_000);
      // Whatever was sent before this call's answer has arrived before it.
      socket.send(JSON.stringify({ t: 'call', id: subscriptions + 1, op: 'health.get', params: {} }));
      expect((await answered(subscriptions + 1)).t).toBe('result');
      console.log(`${subscriptions} subscriptions, nothing acknowledged: ${received} bytes sent (budget ${budget})`);
      expect(received).toBeLessThanOrEqual(budget);

      // Now every byte is acknowledged as it comes: the stream and every subscription run flat out.
      acking = true;
      for (const [sub, offset] of next) socket.send(JSON.stringify({ t: 'ack', sub, offset }));
      const before = received;
      const startedAt = new Map(next);
      const samples: { ms: number; connections: number }[] = [];
      for (let sample = 0; sample < 5; sample += 1) {
        await waitFor('the flood to go on', () => received > before + (sample + 1) * 4 * budget, 30_000);
        const started = performance.now();
        const health = await fetch(`${flood.url}/v1/health`, { signal: AbortSignal.timeout(30_000) });
        expect(health.status).toBe(200);
        const metrics = await (
          await fetch(`${flood.url}/metrics`, { headers: { authorization: `Bearer ${ALICE}` }, signal: AbortSignal.timeout(30_000) })
        ).text();
        const connections = Number(/^execworld_memory_bytes\{budget="connections"\} (\d+)/m.exec(metrics)?.[1]);
        samples.push({ ms: Math.round(performance.now() - started), connections });
      }
      console.log(
        `flood: ${received - before} bytes to ${subscriptions} subscriptions; health and metrics answered in ${samples.map((each) => each.ms).join(', ')} ms; ` +
          `queued for connections ${samples.map((each) => each.connections).join(', ')} bytes; daemon RSS ${Math.round(process.memoryUsage().rss / 2 ** 20)} MiB`,
      );
      // The socket queue holds at most its high-water mark and a frame more.
      for (const sample of samples) expect(sample.connections).toBeLessThanOrEqual(budget + 64 * 1024 + 13);
      // The budget is shared in turn: no subscription is starved by those that ack and send again at once.
      const moved = (): number => [...next].filter(([sub, offset]) => offset > (startedAt.get(sub) ?? 0)).length;
      await waitFor('every subscription to move on', () => moved() === subscriptions, 30_000);
    } finally {
      socket.terminate();
      await flood.request('DELETE', `/v1/processes/${target.id}`);
      await flood.close();
    }
  }, 120_000);
});

describe('per-owner bounds', () => {
  test('counts creates pipelined on one WebSocket against the session limit', async () => {
    const client = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    for (let id = 1; id <= 20; id += 1) client.send({ t: 'call', id, op: 'terminal.create', params: TERMINAL });
    const replies = await client.until('every create answered', () => {
      const answered = client.messages.filter((message) => message.t === 'result' || message.t === 'error');
      return answered.length === 20 ? answered : undefined;
    });
    const created = replies.filter((reply) => reply.t === 'result');
    expect(created).toHaveLength(5);
    expect(replies.filter((reply) => reply.t === 'error' && reply.error.code === 'LIMIT_EXCEEDED')).toHaveLength(15);
    for (const reply of created) await client.call('terminal.delete', { id: (reply as { result: { id: string } }).result.id });
    // Each delete was answered: none of the owner's slots is held any more.
    expect((await daemon.request('GET', '/v1/terminals')).body.terminals).toEqual([]);
    client.close();
    await waitFor('the connection to close', () => daemon.daemon.hub.connections === 0);
  });

  test("refuses connections and subscriptions past the owner's limits with 429 / LIMIT_EXCEEDED", async () => {
    const sockets = await Promise.all([1, 2, 3, 4].map(() => TestSocket.open(daemon.wsUrl, { token: ALICE })));
    await expect(TestSocket.open(daemon.wsUrl, { token: ALICE })).rejects.toMatchObject({ status: 429 });
    const terminal = await sockets[0]!.call('terminal.create', TERMINAL);
    const target = { kind: 'terminal', id: terminal.id, stream: 'output' };
    // Subscriptions count over all the owner's connections.
    await sockets[0]!.subscribe({ target, from: 0 });
    await sockets[1]!.subscribe({ target, from: 0 });
    await sockets[2]!.subscribe({ target, from: 0 });
    await expect(sockets[3]!.subscribe({ target, from: 0 })).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' });
    await sockets[0]!.call('terminal.delete', { id: terminal.id });
    for (const socket of sockets) socket.close();
    await waitFor('the connections to close', () => daemon.daemon.hub.connections === 0);
  });

  test("gives an owner's read tokens budgets of their own: watchers at their limits never lock the owner out", async () => {
    const terminal = await daemon.request('POST', '/v1/terminals', { body: TERMINAL });
    const target = { kind: 'terminal', id: terminal.body.id as string, stream: 'output' };
    // Readers take every connection and subscription their budgets allow.
    const readers = await Promise.all([1, 2, 3, 4].map(() => TestSocket.open(daemon.wsUrl, { token: ALICE_READER })));
    await expect(TestSocket.open(daemon.wsUrl, { token: ALICE_READER })).rejects.toMatchObject({ status: 429 });
    for (const reader of readers.slice(0, 3)) await reader.subscribe({ target, from: 0 });
    await expect(readers[3]!.subscribe({ target, from: 0 })).rejects.toMatchObject({
      code: 'LIMIT_EXCEEDED',
      message: expect.stringMatching(/read-only tokens/) as string,
    });
    // The owner's own tokens still have all of theirs.
    const writers = await Promise.all([1, 2, 3, 4].map(() => TestSocket.open(daemon.wsUrl, { token: ALICE })));
    for (const writer of writers.slice(0, 3)) await writer.subscribe({ target, from: 0 });
    await expect(writers[3]!.subscribe({ target, from: 0 })).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' });
    await expect(TestSocket.open(daemon.wsUrl, { token: ALICE })).rejects.toMatchObject({ status: 429 });
    // A reader that leaves frees its own budget, not the owner's.
    readers[0]!.close();
    await waitFor("the reader's connection to close", () => daemon.daemon.hub.connections === 7);
    (await TestSocket.open(daemon.wsUrl, { token: ALICE_READER })).close();
    await daemon.request('DELETE', `/v1/terminals/${terminal.body.id}`);
    for (const socket of [...readers, ...writers]) socket.close();
    await waitFor('the connections to close', () => daemon.daemon.hub.connections === 0);
  });
  test('gives the tokens an owner minted budgets of their own: what holds one never locks the owner out', async () => {
    const minted = await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 60_000 } });
    expect(minted.status).toBe(201);
    const token = minted.body.token as string;
    const terminal = await daemon.request('POST', '/v1/terminals', { body: TERMINAL });
    const target = { kind: 'terminal', id: terminal.body.id as string, stream: 'output' };
    const held = await Promise.all([1, 2, 3, 4].map(() => TestSocket.open(daemon.wsUrl, { token })));
    await expect(TestSocket.open(daemon.wsUrl, { token })).rejects.toMatchObject({ status: 429 });
    for (const socket of held.slice(0, 3)) await socket.subscribe({ target, from: 0 });
    await expect(held[3]!.subscribe({ target, from: 0 })).rejects.toMatchObject({
      code: 'LIMIT_EXCEEDED',
      message: 'the minted tokens of owner alice already have 3 subscriptions open (the limit)',
    });
    // The token file's tokens of the owner still have all of theirs.
    const own = await Promise.all([1, 2, 3, 4].map(() => TestSocket.open(daemon.wsUrl, { token: ALICE })));
    for (const socket of own.slice(0, 3)) await socket.subscribe({ target, from: 0 });
    await expect(TestSocket.open(daemon.wsUrl, { token: ALICE })).rejects.toMatchObject({ status: 429 });
    // Revoked, the token's connections close, and its budget is free for the next one minted.
    expect((await daemon.request('DELETE', `/v1/tokens/${minted.body.id as string}`)).status).toBe(200);
    await waitFor("the revoked token's connections to close", () => daemon.daemon.hub.connections === 4);
    const next = await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 60_000 } });
    (await TestSocket.open(daemon.wsUrl, { token: next.body.token as string })).close();
    await daemon.request('DELETE', `/v1/terminals/${terminal.body.id}`);
    for (const socket of [...held, ...own]) socket.close();
    await waitFor('the connections to close', () => daemon.daemon.hub.connections === 0);
  });
});

describe('input for a program that does not read', () => {
  test('is refused past the backlog with 429 for a stdin pipe (terminals: test/provider/terminal-isolation.test.ts)', async () => {
    const runtime = await connect(daemon.url, { token: ALICE });
    try {
      const sleeper = runtime.spawn({ argv: ['sleep', '300'], cwd: '/tmp', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' }, graceMs: 500 });
      await sleeper.started;
      const chunk = Buffer.alloc(32 * 1024, 120).toString('base64');
      // Each write answers once the pipe took it, which a program that does not read never does:
      // they are sent together, and those past the backlog are refused at once.
      const answers: { status: number; body: any }[] = [];
      const writes = Array.from({ length: 12 }, () =>
        daemon.request('POST', `/v1/processes/${sleeper.id}/stdin`, { body: { data: chunk, encoding: 'base64' } }).then((answer) => answers.push(answer)),
      );
      await waitFor('a refused write', () => answers.some((answer) => answer.status === 429));
      expect(answers.find((answer) => answer.status === 429)).toMatchObject({
        body: { error: { code: 'LIMIT_EXCEEDED', message: expect.stringMatching(/not reading its stdin/) as string } },
      });
      sleeper.terminate();
      await sleeper.done;
      // Writes accepted but not taken by the pipe fail once the program is gone.
      await Promise.all(writes);
      expect(answers.filter((answer) => answer.status === 409)).not.toHaveLength(0);
    } finally {
      await runtime.dispose();
    }
  });
});

describe('a request body that never ends', () => {
  test('gets its 401 and a closed connection, not a socket held open', async () => {
    const url = new URL(daemon.url);
    const socket = netConnect(Number(url.port), url.hostname);
    let answer = '';
    let ended = false;
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('close', () => (ended = true));
    socket.on('error', () => (ended = true));
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('POST /v1/terminals HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n');
    // Chunks keep coming until the daemon hangs up (bounded, so the test ends either way).
    for (let index = 0; index < 500 && !ended; index += 1) {
      socket.write('10\r\n{"argv":["/bin/x\r\n');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(answer).toMatch(/^HTTP\/1\.1 401/);
    expect(answer.toLowerCase()).toContain('connection: close');
    await waitFor('the daemon to close the connection', () => ended);
    socket.destroy();
  });
});

/** A request on a fresh connection whose body the test sends itself: what came back so far, and whether the daemon hung up. */
async function rawRequest(url: string, head: string): Promise<{ socket: Socket; answer: () => string; closed: () => boolean }> {
  const { port, hostname } = new URL(url);
  const socket = netConnect(Number(port), hostname);
  let answer = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  socket.on('close', () => (closed = true));
  // A reset after the answer (the daemon hangs up on bytes it did not read) is a hang-up too.
  socket.on('error', () => (closed = true));
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(head);
  return { socket, answer: () => answer, closed: () => closed };
}

/** The JSON body of a raw HTTP answer. */
const bodyOf = (answer: string): unknown => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as unknown;

describe('an authenticated request body that never ends (--request-timeout-ms)', () => {
  const TIMEOUT_MS = 1000;
  let short: TestDaemon;
  const scratch = mkdtempSync(join(tmpdir(), 'endless-body-'));
  test.beforeAll(async ({ startFileDaemon }) => {
    short = await startFileDaemon({ requestTimeoutMs: TIMEOUT_MS });
  });
  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  test('is cut on a JSON route with 408 CLIENT_TIMEOUT though it keeps trickling', async () => {
    const request = await rawRequest(
      short.url,
      `POST /v1/processes HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALICE}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n`,
    );
    // A blank every 100 ms, far more often than the timeout: the whole body is what must arrive in time.
    const trickle = setInterval(() => request.socket.write('1\r\n \r\n'), 100);
    try {
      await waitFor('the daemon to cut the request', request.closed, 20_000);
    } finally {
      clearInterval(trickle);
      request.socket.destroy();
    }
    expect(request.answer()).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(request.answer())).toEqual({ error: { code: 'CLIENT_TIMEOUT', message: expect.stringContaining(`${TIMEOUT_MS} ms`) } });
  });

  test('is cut after its answer on a route that does not read it (a GET), closing the connection', async () => {
    const request = await rawRequest(
      short.url,
      `GET /v1/terminals HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALICE}\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\n`,
    );
    const trickle = setInterval(() => request.socket.write('1\r\nx\r\n'), 100);
    try {
      await waitFor('the daemon to cut the request', request.closed, 20_000);
    } finally {
      clearInterval(trickle);
      request.socket.destroy();
    }
    // Answered already: no second status line after it.
    expect(request.answer()).toMatch(/^HTTP\/1\.1 200 /);
    expect(request.answer()).not.toContain('HTTP/1.1 408');
  });

  test('is cut on an upload once no byte came for the timeout, keeping the bytes that did', async () => {
    const created = await short.request('POST', '/v1/files/uploads', { body: { path: join(scratch, 'stalled.bin') } });
    const id = created.body.id as string;
    const request = await rawRequest(
      short.url,
      `PUT /v1/files/uploads/${id}?offset=0 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALICE}\r\n` +
        `content-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n1000\r\n${'u'.repeat(4096)}\r\n`,
    );
    try {
      // Then nothing more, and no end.
      await waitFor('the daemon to cut the stalled upload', request.closed, 20_000);
    } finally {
      request.socket.destroy();
    }
    expect(request.answer()).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(request.answer())).toMatchObject({ error: { code: 'CLIENT_TIMEOUT' } });
    // A cut keeps what arrived: the sender resumes from there.
    expect(await short.request('GET', `/v1/files/uploads/${id}`)).toMatchObject({ status: 200, body: { offset: 4096 } });
    await short.request('DELETE', `/v1/files/uploads/${id}`);
  });

  test('is not cut on an upload that goes on arriving, however long it takes in all', async () => {
    const created = await short.request('POST', '/v1/files/uploads', { body: { path: join(scratch, 'slow.bin') } });
    const id = created.body.id as string;
    const request = await rawRequest(
      short.url,
      `PUT /v1/files/uploads/${id}?offset=0 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${ALICE}\r\n` +
        `content-type: application/octet-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n`,
    );
    // A kilobyte every 50 ms for several times the timeout: slow, never idle.
    const started = Date.now();
    let sent = 0;
    while (Date.now() - started < 5 * TIMEOUT_MS && !request.closed()) {
      request.socket.write(`400\r\n${'s'.repeat(1024)}\r\n`);
      sent += 1024;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    request.socket.write('0\r\n\r\n');
    await waitFor('the answer', request.closed, 20_000);
    expect(request.answer()).toMatch(/^HTTP\/1\.1 200 /);
    expect(bodyOf(request.answer())).toMatchObject({ id, offset: sent });
    console.log(`an upload of ${sent} bytes over ${Date.now() - started} ms went through a ${TIMEOUT_MS} ms request timeout`);
    await short.request('DELETE', `/v1/files/uploads/${id}`);
  });
});
