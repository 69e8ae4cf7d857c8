/**
 * The daemon accepts more than one connection per turn of its event loop
 * (server/accept-lanes.ts): libuv accepts one per listening handle per turn,
 * so a burst of new connections to a busy daemon held a health probe's
 * connection behind all of them. A server as busy as a daemon ending
 * hundreds of sessions, with and without lanes, and the daemon's own lanes
 * over plain HTTP and TLS, across a takeover and at shutdown.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { callDaemon, type DaemonProcess } from '../helpers/daemon-process.ts';
import { requestTakeover } from '../helpers/takeover.ts';
import { selfSignedCertificate } from '../helpers/tls.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonProcessTest();
const FIXTURE = new URL('../fixtures/busy-server.ts', import.meta.url).pathname;
/** Connections that come at once before the probe's. */
const BURST = 48;

function lines(child: ChildProcessWithoutNullStreams): () => Promise<string> {
  let buffered = '';
  const waiting: ((line: string) => void)[] = [];
  const held: string[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      const next = waiting.shift();
      if (next === undefined) held.push(line);
      else next(line);
    }
  });
  return () => (held.length > 0 ? Promise.resolve(held.shift()!) : new Promise((resolve) => waiting.push(resolve)));
}

/**
 * The turn of the loop each of `count` requests on new connections was
 * answered in, in the order they connected; over TLS when `ca` is given.
 */
async function turnsOfBurst(port: number, count: number, ca?: Buffer): Promise<number[]> {
  const sockets: Socket[] = [];
  const answers = Array.from({ length: count }, (_, index) => {
    const socket = ca === undefined ? connect(port, '127.0.0.1') : tlsConnect({ port, host: '127.0.0.1', ca });
    sockets.push(socket);
    socket.once(ca === undefined ? 'connect' : 'secureConnect', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    return new Promise<number>((resolve, reject) => {
      socket.once('error', reject);
      socket.once('close', () => {
        const body = text.split('\r\n\r\n')[1] ?? '';
        if (!/^\d+$/.test(body)) reject(new Error(`connection ${String(index)} was answered ${JSON.stringify(text)}`));
        else resolve(Number(body));
      });
    });
  });
  try {
    return await Promise.all(answers);
  } finally {
    for (const socket of sockets) socket.destroy();
  }
}

/**
 * A busy server with `lanes` handles, sent a burst of new connections: how
 * many handles accepted, and the turns from the first answer to the last
 * connection's. Over TLS with `tls`'s certificate.
 */
async function lastOfBurst(lanes: number, tls?: { cert: string; key: string }): Promise<{ open: number; turns: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, String(lanes), ...(tls === undefined ? [] : [tls.cert, tls.key])], { stdio: 'pipe' });
  try {
    const next = lines(child);
    const [port, open] = (await next()).split(' ').map(Number) as [number, number];
    child.stdin.write('go\n');
    expect(await next()).toBe('busy');
    const turns = await turnsOfBurst(port, BURST + 1, tls === undefined ? undefined : readFileSync(tls.cert));
    return { open, turns: turns.at(-1)! - Math.min(...turns) };
  } finally {
    child.kill('SIGKILL');
  }
}

/** How many of the daemon's descriptors are its listening socket. */
function listeningDescriptors(daemon: DaemonProcess): number {
  const port = new URL(daemon.url).port;
  const hex = Number(port).toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${daemon.pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // st 0A: LISTEN
      if (fields[1]?.endsWith(`:${hex}`) === true && fields[3] === '0A') inodes.add(fields[9]!);
    }
  }
  let count = 0;
  for (const fd of readdirSync(`/proc/${daemon.pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${daemon.pid}/fd/${fd}`);
      if (inodes.has(/^socket:\[(\d+)\]$/.exec(target)?.[1] ?? '')) count += 1;
    } catch (_error) {
      // Closed meanwhile.
    }
  }
  return count;
}

describe('accept lanes', () => {
  test('a busy server answers the last of a burst of new connections within a few turns, not a turn each', async () => {
    const alone = await lastOfBurst(1);
    const laned = await lastOfBurst(8);
    console.log(
      `the last of ${String(BURST + 1)} new connections to a busy server: ${String(alone.turns)} turns after the first with one handle, ${String(laned.turns)} with eight`,
    );
    expect([alone.open, laned.open]).toEqual([1, 8]);
    // One handle accepts a connection a turn: the last waits behind every other.
    expect(alone.turns).toBeGreaterThanOrEqual(BURST * 0.75);
    // Eight accept eight a turn.
    expect(laned.turns).toBeLessThanOrEqual(Math.ceil((BURST + 1) / 8) + 4);
  });

  test('connections a lane accepts are served over TLS', async () => {
    const laned = await lastOfBurst(8, selfSignedCertificate());
    expect(laned.open).toBe(8);
    expect(laned.turns).toBeLessThanOrEqual(Math.ceil((BURST + 1) / 8) + 4);
  });

  test('the daemon accepts on eight handles, and again after a takeover', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-lanes-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    await waitFor('the lanes to listen', () => listeningDescriptors(daemon) === 8);
    const outcome = await requestTakeover(stateDir);
    expect(outcome.status).toBe(0);
    await waitFor("the new image's lanes to listen", () => listeningDescriptors(daemon) === 8);
    const answers = await Promise.all(Array.from({ length: 40 }, () => callDaemon(daemon, 'GET', '/v1/health')));
    expect(answers.every((answer) => answer.status === 'ok')).toBe(true);
  });
});
