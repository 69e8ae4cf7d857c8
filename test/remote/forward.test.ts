/**
 * Port forwarding over the SDK's WebSocket (forwardPort): a server started
 * inside the world through the daemon, reached through a local port; bytes
 * exact through a cut of the WebSocket, half-close, a slow reader that holds
 * back only its own forward, and the refusals.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { get, type IncomingMessage } from 'node:http';
import { connect as tcpConnect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, describe, expect } from 'vitest';
import { connect, isExecworldError, type RemoteRuntime } from '@execworld/sdk';
import { FORWARD_WINDOW_BYTES } from '@execworld/sdk/protocol';
import { ALICE, ALICE_READER, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { FaultProxy } from '../helpers/proxy.ts';
import { waitFor } from '../helpers/wait.ts';
import { canMakeUsers, osUsers } from '../helpers/os-users.ts';
import { socketUid } from '../helpers/proc.ts';
import { freePort, patternBytes, patternSha256, startWorldServer as worldServer } from '../fixtures/world-server.ts';

const MiB = 1024 * 1024;
const test = daemonTest();
const fast = { reconnectInitialDelayMs: 5, reconnectMaxDelayMs: 50, heartbeatMs: 500 };
const runtimes: RemoteRuntime[] = [];
afterAll(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.dispose();
});

async function runtimeOf(url: string, token = ALICE): Promise<RemoteRuntime> {
  const runtime = await connect(url, { token, ...fast });
  runtimes.push(runtime);
  return runtime;
}

/**
 * The most a stalled forward can hold between the world's server and the local
 * reader: the largest send and receive buffers of two TCP connections (the
 * world's, the local one) and the forward's window each way.
 */
function heldAtMost(): number {
  const largest = (file: string): number => Number(readFileSync(`/proc/sys/net/ipv4/${file}`, 'utf8').trim().split(/\s+/)[2]);
  return 2 * (largest('tcp_wmem') + largest('tcp_rmem')) + 2 * FORWARD_WINDOW_BYTES + MiB;
}

/** GET `path` on 127.0.0.1:`port`: status, body's length and SHA-256; `onBytes` hears the running count. */
function fetchHash(port: number, path: string, onBytes?: (bytes: number) => void): Promise<{ status: number; bytes: number; sha: string; text: string }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path, agent: false }, (res: IncomingMessage) => {
      const hash = createHash('sha256');
      let bytes = 0;
      let head = '';
      res.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        bytes += chunk.length;
        if (head.length < 256) head += chunk.toString('latin1');
        onBytes?.(bytes);
      });
      res.on('end', () => resolve({ status: res.statusCode!, bytes, sha: hash.digest('hex'), text: head }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/**
 * The world's side of a forward, watched: a server of the test on 127.0.0.1, which
 * answers each connection with `onConnection` and notes how each ended
 * (`closed`, after an error's code when one came).
 */
async function watchedServer(onConnection: (connection: Socket) => void = () => undefined): Promise<{ server: Server; port: number; ended: string[] }> {
  const ended: string[] = [];
  const server = createServer((connection) => {
    connection.on('error', (error: NodeJS.ErrnoException) => ended.push(error.code ?? 'error'));
    connection.on('close', () => ended.push('closed'));
    onConnection(connection);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, ended };
}

function countConnections(server: Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
}

/** What a raw local connection receives until it closes, and how it closed. */
function drain(socket: Socket): Promise<{ text: string; error: string | undefined }> {
  return new Promise((resolve) => {
    let text = '';
    let error: string | undefined;
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    socket.on('error', (failure: NodeJS.ErrnoException) => (error = failure.code ?? failure.message));
    socket.on('close', () => resolve({ text, error }));
  });
}

describe('forwardPort', () => {
  test('reaches an HTTP server in the world from a local port', async ({ daemon }) => {
    const runtime = await runtimeOf(daemon.url);
    const port = await worldServer(runtime);
    const forward = await runtime.forwardPort({ remotePort: port });
    expect(forward.port).toBeGreaterThan(0);
    expect(forward.host).toBe('127.0.0.1');
    const answer = await fetchHash(forward.port, '/hello');
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('hello from the world\n');
    // Several at once on the one WebSocket.
    const many = await Promise.all(Array.from({ length: 8 }, () => fetchHash(forward.port, '/bytes?n=1000000')));
    for (const one of many) expect(one.sha).toBe(patternSha256(1_000_000));
    await waitFor('the local connections closed', () => forward.connections === 0);
    await forward.close();
  });

  test('carries 100 MiB byte-exact through a cut of the WebSocket halfway', async ({ daemon }) => {
    const proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
    try {
      const direct = await runtimeOf(daemon.url);
      const port = await worldServer(direct);
      const runtime = await runtimeOf(proxy.url);
      const forward = await runtime.forwardPort({ remotePort: port });
      let cut = false;
      const started = performance.now();
      const answer = await fetchHash(forward.port, `/bytes?n=${100 * MiB}`, (bytes) => {
        if (!cut && bytes >= 50 * MiB) {
          cut = true;
          proxy.cut();
        }
      });
      const seconds = (performance.now() - started) / 1000;
      console.log(`100 MiB through the forward with one cut: ${(100 / seconds).toFixed(1)} MiB/s`);
      expect(cut).toBe(true);
      expect(answer.bytes).toBe(100 * MiB);
      expect(answer.sha).toBe(patternSha256(100 * MiB));
      await forward.close();
    } finally {
      await proxy.close();
    }
  }, 120_000);

  test('carries 32 MiB to the world byte-exact through a cut of the WebSocket halfway', async ({ daemon }) => {
    const proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
    try {
      const port = await worldServer(await runtimeOf(daemon.url), 'tcp');
      const runtime = await runtimeOf(proxy.url);
      const forward = await runtime.forwardPort({ remotePort: port });
      const socket = tcpConnect({ host: '127.0.0.1', port: forward.port, allowHalfOpen: true });
      const received = drain(socket);
      const block = patternBytes(MiB);
      let cut = false;
      for (let sent = 0; sent < 32 * MiB; sent += MiB) {
        if (!socket.write(block)) await new Promise((resolve) => socket.once('drain', resolve));
        if (!cut && sent >= 16 * MiB) {
          cut = true;
          proxy.cut();
        }
      }
      socket.end();
      const expected = createHash('sha256');
      for (let index = 0; index < 32; index += 1) expected.update(block);
      expect(await received).toEqual({ text: `got ${32 * MiB} bytes sha256 ${expected.digest('hex')}\n`, error: undefined });
      await forward.close();
    } finally {
      await proxy.close();
    }
  }, 120_000);

  test('ends its forwards at once when the daemon closes the WebSocket (a token revoked, the daemon going away)', async ({ startDaemon }) => {
    const own = await startDaemon();
    // The world's side: a server of this test, which sees how its connection ends.
    const { server: world, port: remotePort, ended } = await watchedServer();
    try {
      await using runtime = await connect(own.url, { token: ALICE, ...fast });
      const forward = await runtime.forwardPort({ remotePort });
      const local = tcpConnect({ host: '127.0.0.1', port: forward.port });
      const closed = drain(local);
      local.write('hello');
      await waitFor('the world to get the connection', async () => (await countConnections(world)) === 1);
      // As a revocation closes it: a close frame from the daemon, not a broken connection.
      own.daemon.hub.closeAll();
      await waitFor('the world connection to end', () => ended.includes('closed'));
      expect(ended).toContain('ECONNRESET');
      expect((await closed).error).toBe('ECONNRESET');
      await forward.close();
    } finally {
      world.close();
    }
  });

  test('ends a forward at once when the WebSocket it was made on closes before taking up its output', async ({ startDaemon }) => {
    // A grace far past the waits below: a forward left to it could not end in time.
    const own = await startDaemon({ forwardGraceMs: 600_000 });
    const { server: world, port: remotePort, ended } = await watchedServer();
    try {
      // Made, and neither subscribed to nor written to: the client closes its WebSocket.
      const leaving = await TestSocket.open(own.wsUrl, { token: ALICE });
      await leaving.call('port.connect', { port: remotePort });
      await waitFor('the world to get the first connection', async () => (await countConnections(world)) === 1);
      leaving.close();
      await waitFor('the first world connection to end', () => ended.includes('closed'));
      expect(ended).toEqual(['ECONNRESET', 'closed']);
      // The same when the daemon closes it (a token revoked, the daemon going away).
      const closed = await TestSocket.open(own.wsUrl, { token: ALICE });
      await closed.call('port.connect', { port: remotePort });
      await waitFor('the world to get the second connection', async () => (await countConnections(world)) === 1);
      own.daemon.hub.closeAll();
      await waitFor('the second world connection to end', () => ended.length === 4);
      expect(ended).toEqual(['ECONNRESET', 'closed', 'ECONNRESET', 'closed']);
    } finally {
      world.close();
    }
  });

  test('keeps a forward whose WebSocket broke for the grace period only, then resets it', async ({ startDaemon }) => {
    const own = await startDaemon({ forwardGraceMs: 1000 });
    const proxy = await FaultProxy.start(Number(new URL(own.url).port));
    const { server: world, port: remotePort, ended } = await watchedServer();
    try {
      const runtime = await connect(proxy.url, { token: ALICE, ...fast, reconnectDeadlineMs: 60_000 });
      const forward = await runtime.forwardPort({ remotePort });
      const local = tcpConnect({ host: '127.0.0.1', port: forward.port });
      local.on('error', () => undefined);
      local.write('hello');
      await waitFor('the world to get the connection', async () => (await countConnections(world)) === 1);
      // Broken, and kept from coming back: the daemon waits its grace, then resets the world's connection.
      proxy.stall();
      proxy.cut();
      const brokenAt = performance.now();
      await waitFor('the world connection to be reset', () => ended.includes('closed'), 30_000);
      expect(performance.now() - brokenAt).toBeGreaterThanOrEqual(900);
      expect(ended).toContain('ECONNRESET');
      runtime.close();
      local.destroy();
      await forward.close();
    } finally {
      world.close();
      await proxy.close();
    }
  });

  test('keeps half-close: a client that shut its write side still gets the answer', async ({ daemon }) => {
    const runtime = await runtimeOf(daemon.url);
    const port = await worldServer(runtime, 'tcp');
    const forward = await runtime.forwardPort({ remotePort: port });
    const socket = tcpConnect({ host: '127.0.0.1', port: forward.port, allowHalfOpen: true });
    const received = drain(socket);
    socket.end('x'.repeat(300_000));
    // The world's server answers only once it read the client's FIN.
    expect(await received).toEqual({ text: `got 300000 bytes sha256 ${createHash('sha256').update('x'.repeat(300_000)).digest('hex')}\n`, error: undefined });
    await forward.close();
  });

  test('a slow reader on one forward does not slow another', async ({ daemon }) => {
    const runtime = await runtimeOf(daemon.url);
    const port = await worldServer(runtime);
    const forward = await runtime.forwardPort({ remotePort: port });
    // One connection asks for 256 MiB and reads none of it.
    const stalled = tcpConnect({ host: '127.0.0.1', port: forward.port });
    stalled.write(`GET /bytes?n=${256 * MiB} HTTP/1.1\r\nHost: world\r\n\r\n`);
    stalled.once('data', () => stalled.pause());
    await waitFor('the stalled forward to answer', () => stalled.bytesRead > 0);
    // Another, on the same WebSocket, gets 64 MiB whole meanwhile.
    const other = await fetchHash(forward.port, `/bytes?n=${64 * MiB}`);
    expect(other.sha).toBe(patternSha256(64 * MiB));
    // The world's server could send the stalled one no more than the sockets' buffers and the windows hold, nowhere near 256 MiB:
    // the daemon stopped reading its connection, as the SDK stopped acknowledging what the local socket did not take.
    // Held back, its answer stops growing and never ends; unbounded, it would end once all of it sat in some buffer.
    let sending: number[] = [];
    let last = -1;
    let unchanged = 0;
    await waitFor(
      "the stalled answer's bytes to stop growing, or end",
      async () => {
        sending = JSON.parse((await fetchHash(forward.port, '/sending')).text) as number[];
        const now = sending[0] ?? Number.POSITIVE_INFINITY;
        unchanged = now === last ? unchanged + 1 : 0;
        last = now;
        return unchanged >= 20;
      },
      60_000,
    );
    expect(sending).toHaveLength(1);
    expect(sending[0]).toBeLessThan(heldAtMost());
    console.log(`stalled forward: the world's server sent ${(sending[0]! / MiB).toFixed(1)} MiB of 256 while another forward took 64 MiB`);
    stalled.destroy();
    await forward.close();
  }, 60_000);

  test('closes the local connection to a port that refuses, and says why', async ({ daemon }) => {
    const runtime = await runtimeOf(daemon.url);
    const errors: unknown[] = [];
    const forward = await runtime.forwardPort({ remotePort: await freePort(), onError: (error) => errors.push(error) });
    const closed = await drain(tcpConnect({ host: '127.0.0.1', port: forward.port }));
    expect(closed.text).toBe('');
    expect(closed.error).toBe('ECONNRESET');
    expect(errors).toHaveLength(1);
    expect(isExecworldError(errors[0]) && errors[0].code).toBe('PORT_REFUSED');
    await forward.close();
  });

  test('refuses a read-only token', async ({ daemon }) => {
    const runtime = await runtimeOf(daemon.url);
    const port = await worldServer(runtime);
    const reader = await runtimeOf(daemon.url, ALICE_READER);
    const errors: unknown[] = [];
    const forward = await reader.forwardPort({ remotePort: port, onError: (error) => errors.push(error) });
    const closed = await drain(tcpConnect({ host: '127.0.0.1', port: forward.port }));
    expect(closed.text).toBe('');
    expect(isExecworldError(errors[0]) && errors[0].code).toBe('READ_ONLY');
    await forward.close();
  });
});

describe.runIf(canMakeUsers)('a forward of an owner mapped to an OS user', () => {
  const users = osUsers(afterAll);

  test("connects as the owner's user: the world's server sees the user's uid on its peer, not root's", async ({ startDaemon }) => {
    const user = users.make();
    const token = 'dave-token-0123456789abcdefgh';
    const own = await startDaemon({}, { owners: [{ owner: 'dave', token, user }] });
    // The world's side: a server that answers each connection with its peer socket's uid from the kernel's TCP table.
    const { server: world, port: remotePort } = await watchedServer((connection) =>
      connection.end(`uid ${socketUid(connection.remotePort!, connection.localPort!)}\n`),
    );
    try {
      await using runtime = await connect(own.url, { token, ...fast });
      const forward = await runtime.forwardPort({ remotePort });
      expect(await drain(tcpConnect({ host: '127.0.0.1', port: forward.port }))).toEqual({ text: `uid ${user.uid}\n`, error: undefined });
      await forward.close();
    } finally {
      world.close();
    }
  });
});

describe('port.connect over REST', () => {
  test('refuses a port out of range, naming the field', async ({ daemon }) => {
    const answer = await daemon.request('POST', '/v1/forwards', { body: { port: 70000 } });
    expect(answer.status).toBe(400);
    expect(answer.body.error.code).toBe('INVALID_ARGUMENT');
    expect(answer.body.error.message).toContain('body.port');
  });

  test('refuses a port nothing listens on with 502 PORT_REFUSED', async ({ daemon }) => {
    const answer = await daemon.request('POST', '/v1/forwards', { body: { port: await freePort() } });
    expect(answer.status).toBe(502);
    expect(answer.body.error).toMatchObject({ code: 'PORT_REFUSED', errno: 'ECONNREFUSED' });
  });

  test('refuses a forward past the limit per owner', async ({ startDaemon }) => {
    const tight: TestDaemon = await startDaemon({ maxForwardsPerOwner: 1 });
    // Its own runtime, ended with the test: the daemon goes with it.
    await using runtime = await connect(tight.url, { token: ALICE, ...fast });
    const port = await worldServer(runtime);
    const first = await tight.request('POST', '/v1/forwards', { body: { port } });
    expect(first.status).toBe(201);
    const second = await tight.request('POST', '/v1/forwards', { body: { port } });
    expect(second.status).toBe(429);
    expect(second.body.error.code).toBe('LIMIT_EXCEEDED');
    expect(second.body.error.message).toContain('--max-forwards 1');
  });
});
