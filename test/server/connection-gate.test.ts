/**
 * Connections no valid token has come on are bounded: one that sends no
 * request's headers is closed after --connect-timeout-ms, and past
 * --max-idle-connections of them a new connection closes the oldest. So a
 * flood of idle connections, even one past the daemon's open-file limit,
 * leaves room for the probes and the owners, and an owner's keep-alive
 * connection between requests is kept.
 */
import { readFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { connect, type Socket } from 'node:net';
import { describe, expect } from 'vitest';
import { ALICE } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { callDaemon } from '../helpers/daemon-process.ts';
import { metricSample } from '../helpers/metrics.ts';
import { selfSignedCertificate } from '../helpers/tls.ts';

const test = daemonTest();

/** Opens `count` TCP connections to `url` that send nothing; resolves once each is connected. */
async function idleSockets(url: string, count: number): Promise<{ sockets: Socket[]; closed: Promise<void>[] }> {
  const { hostname, port } = new URL(url);
  const sockets: Socket[] = [];
  const closed: Promise<void>[] = [];
  for (let i = 0; i < count; i += 1) {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on('error', () => {});
    closed.push(new Promise((resolve) => socket.once('close', () => resolve())));
    await new Promise<void>((resolve) => {
      socket.once('connect', resolve);
      socket.once('close', () => resolve());
    });
    sockets.push(socket);
  }
  return { sockets, closed };
}

/** GET `path` through `agent` with `token` (alice's unless null: none): its status, and whether it went over a connection used before. */
function agentGet(
  url: string,
  path: string,
  agent: Agent | HttpsAgent,
  token: string | null = ALICE,
): Promise<{ status: number; reused: boolean; connection?: string }> {
  return new Promise((resolve, reject) => {
    const send = url.startsWith('https:') ? httpsRequest : httpRequest;
    const request = send(`${url}${path}`, { agent, headers: token === null ? {} : { authorization: `Bearer ${token}` } }, (response) => {
      response.resume();
      response.on('end', () =>
        resolve({ status: response.statusCode!, reused: request.reusedSocket, ...(response.headers.connection === 'close' ? { connection: 'close' } : {}) }),
      );
    });
    request.on('error', reject);
    request.end();
  });
}

describe('connections no valid token has come on', () => {
  test('are closed when they send nothing for --connect-timeout-ms, the oldest first past --max-idle-connections; an owner keeps its idle keep-alive connection', async ({
    startDaemon,
  }) => {
    const daemon = await startDaemon({ maxIdleConnections: 8, connectTimeoutMs: 1000 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await agentGet(daemon.url, '/v1/terminals', agent)).toEqual({ status: 200, reused: false });

      const early = await idleSockets(daemon.url, 8);
      // One more than the bound: the oldest goes, the others stay.
      const late = await idleSockets(daemon.url, 1);
      await early.closed[0];
      expect(early.sockets.slice(1).every((socket) => !socket.destroyed)).toBe(true);
      // A probe's connection, which sends its request at once, is answered in the middle of them.
      expect((await daemon.request('GET', '/v1/health', { token: null })).status).toBe(200);
      // Those that never send anything are closed by the deadline.
      await Promise.all([...early.closed, ...late.closed]);

      // Past the deadline and the flood, alice's connection between requests was kept and is used again.
      expect(await agentGet(daemon.url, '/v1/terminals', agent)).toEqual({ status: 200, reused: true });
      const metrics = await (await fetch(`${daemon.url}/metrics`, { headers: { authorization: `Bearer ${ALICE}` } })).text();
      // The flood's first, and maybe another while the probe's answered connection waited among them to close; the others by the deadline.
      expect(metricSample(metrics, 'execworld_idle_connections_closed_total', { reason: 'evicted' })).toBeGreaterThanOrEqual(1);
      expect(metricSample(metrics, 'execworld_idle_connections_closed_total', { reason: 'timeout' })).toBeGreaterThanOrEqual(7);
    } finally {
      agent.destroy();
    }
  });

  test('are closed once a request without a valid token on them is answered, so that no client reuses one the deadline or a flood would close', async ({
    startDaemon,
  }) => {
    const daemon = await startDaemon({ maxIdleConnections: 8, connectTimeoutMs: 1000 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // A probe, and a refused token: each answer says the connection closes, and the next request takes a new one.
      expect(await agentGet(daemon.url, '/v1/health', agent, null)).toEqual({ status: 200, reused: false, connection: 'close' });
      expect(await agentGet(daemon.url, '/v1/terminals', agent, 'not-a-token-of-this-daemon')).toEqual({ status: 401, reused: false, connection: 'close' });
      // A valid token makes the connection its owner's: kept, whatever comes on it next.
      expect(await agentGet(daemon.url, '/v1/terminals', agent)).toEqual({ status: 200, reused: false });
      expect(await agentGet(daemon.url, '/v1/health', agent, null)).toEqual({ status: 200, reused: true });
    } finally {
      agent.destroy();
    }
  });

  test('over TLS are timed from before their handshake, and an owner keeps its idle keep-alive connection', async ({ startDaemon }) => {
    const { cert, key } = selfSignedCertificate();
    const daemon = await startDaemon({ tlsCert: cert, tlsKey: key, maxIdleConnections: 8, connectTimeoutMs: 1000 });
    const agent = new HttpsAgent({ keepAlive: true, maxSockets: 1, ca: readFileSync(cert) });
    try {
      expect(await agentGet(daemon.url, '/v1/terminals', agent)).toEqual({ status: 200, reused: false });
      // No handshake: closed by the deadline all the same.
      const silent = await idleSockets(daemon.url, 2);
      await Promise.all(silent.closed);
      expect(await agentGet(daemon.url, '/v1/terminals', agent)).toEqual({ status: 200, reused: true });
    } finally {
      agent.destroy();
    }
  });

  test("an owner's connections past --max-requests open are closed after their answer, never while idle", async ({ startDaemon }) => {
    const daemon = await startDaemon({ maxRequestsPerOwner: 2 });
    const agents = [0, 1, 2].map(() => new Agent({ keepAlive: true, maxSockets: 1 }));
    try {
      // Two of alice's connections stay open between requests; the answer on a third says it closes.
      expect(await agentGet(daemon.url, '/v1/terminals', agents[0]!)).toEqual({ status: 200, reused: false });
      expect(await agentGet(daemon.url, '/v1/terminals', agents[1]!)).toEqual({ status: 200, reused: false });
      expect(await agentGet(daemon.url, '/v1/terminals', agents[2]!)).toEqual({ status: 200, reused: false, connection: 'close' });
      expect(await agentGet(daemon.url, '/v1/terminals', agents[0]!)).toEqual({ status: 200, reused: true });
      expect(await agentGet(daemon.url, '/v1/terminals', agents[1]!)).toEqual({ status: 200, reused: true });
    } finally {
      for (const agent of agents) agent.destroy();
    }
  });

  test('past the open-file limit leave room for a probe and an owner while they stay open', async ({ spawnDaemon }) => {
    // 256 descriptors: the default bound is a quarter of them, 64.
    const daemon = await spawnDaemon([], [], { maxOpenFiles: 256 });
    const flood = await idleSockets(daemon.url, 400);
    try {
      const health = await fetch(`${daemon.url}/v1/health`);
      expect(health.status).toBe(200);
      const terminals = (await callDaemon(daemon, 'GET', '/v1/terminals')) as { terminals: unknown[] };
      expect(terminals.terminals).toEqual([]);
      // The newest connections of the flood are still open: the daemon holds them, as many as its bound.
      expect(flood.sockets.slice(-32).every((socket) => !socket.destroyed)).toBe(true);
    } finally {
      for (const socket of flood.sockets) socket.destroy();
    }
  });
});
