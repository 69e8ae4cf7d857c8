/**
 * Every queue the daemon keeps for a client has a bound: a client that sends
 * calls and never reads, pipelined creates, connections, subscriptions, input
 * for a program that does not read, and a request body that never ends.
 */
import { connect as netConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { connect } from '@execworld/sdk';
import { WS_SUBPROTOCOL } from '@execworld/sdk/protocol';
import { ALICE, ALICE_READER, startDaemon, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
beforeAll(async () => {
  daemon = await startDaemon({
    maxSessionsPerOwner: 5,
    maxConnectionsPerOwner: 4,
    maxSubscriptionsPerOwner: 3,
    connectionBufferBytes: 256 * 1024,
    inputBacklogBytes: 64 * 1024,
    heartbeatMs: 1000,
  });
});
afterAll(() => daemon.close());

const TERMINAL = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 };

describe('a WebSocket client that sends calls and never reads', () => {
  it("is held back, then disconnected, with the daemon's queue for it bounded", async () => {
    const socket = new WebSocket(daemon.wsUrl, [WS_SUBPROTOCOL], { headers: { authorization: `Bearer ${ALICE}` } });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    let closed = false;
    socket.on('close', () => (closed = true));
    // The client stops reading: every answer stays queued on the daemon's side.
    (socket as unknown as { _socket: { pause(): void } })._socket.pause();
    // Answers of a kilobyte or more each: a listing of a few terminals.
    const terminals = await Promise.all([1, 2, 3].map(() => daemon.request('POST', '/v1/terminals', { body: TERMINAL })));
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
    // Held back: past the budget the daemon stops reading its calls, so its queue stops growing.
    expect(peak).toBeGreaterThan(256 * 1024);
    expect(peak).toBeLessThanOrEqual(4 * 256 * 1024 + 64 * 1024);
    // Terminated by the heartbeat or the hard bound, whichever comes first; never left queueing.
    await waitFor('the daemon to drop the client', () => daemon.daemon.hub.connections === 0, 60_000);
    socket.terminate();
    for (const terminal of terminals) await daemon.request('DELETE', `/v1/terminals/${terminal.body.id}`);
  }, 90_000);
});

describe('per-owner bounds', () => {
  it('counts creates pipelined on one WebSocket against the session limit', async () => {
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
    client.close();
    await waitFor('the connection to close', () => daemon.daemon.hub.connections === 0);
  });

  it("refuses connections and subscriptions past the owner's limits with 429 / LIMIT_EXCEEDED", async () => {
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

  it("gives an owner's read tokens budgets of their own: watchers at their limits never lock the owner out", async () => {
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
});

describe('input for a program that does not read', () => {
  it('is refused past the backlog with 429 for a stdin pipe (terminals: test/provider/terminal-isolation.test.ts)', async () => {
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
  it('gets its 401 and a closed connection, not a socket held open', async () => {
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
