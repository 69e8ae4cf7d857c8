/**
 * Port forwarding against `ssh -L` on loopback: a Node HTTP server in the
 * world (test/fixtures/world-server.ts, started through the daemon), reached
 * directly, through `forwardPort()` (the SDK's one WebSocket to the daemon)
 * and through an OpenSSH local forward to the bench's sshd. Each path's
 * download throughput, the round trip of a small request on a kept
 * connection, and a fresh connection's first request; the added latency is
 * each path's over the direct one, in the same round.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@execworld/sdk';
import { freePort, startWorldServer } from '../../test/fixtures/world-server.ts';
import type { DaemonProcess } from './daemon.ts';
import type { Sshd } from './ssh-peer.ts';
import { median } from './stats.ts';

export const FORWARD_PATHS = ['direct', 'execworld forward', 'ssh -L'] as const;
export type ForwardPath = (typeof FORWARD_PATHS)[number];

export interface ForwardFigures {
  /** MB/s (10^6 bytes) of one download. */
  readonly mbps: number;
  /** Median milliseconds of a small request on a kept connection. */
  readonly rttMs: number;
  /** Median milliseconds of a fresh connection and its first small request. */
  readonly connectMs: number;
}

/** GET `path` on 127.0.0.1:`port`; resolves with the body's length. */
function fetchBytes(port: number, path: string, agent: Agent | false): Promise<number> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path, agent }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => (bytes += chunk.length));
      res.on('end', () => resolve(bytes));
      res.on('error', reject);
    }).on('error', reject);
  });
}

async function figuresOf(port: number, bytes: number, requests: number): Promise<ForwardFigures> {
  const started = performance.now();
  const got = await fetchBytes(port, `/bytes?n=${bytes}`, false);
  if (got !== bytes) throw new Error(`a download of ${bytes} bytes gave ${got}`);
  const mbps = bytes / 1e6 / ((performance.now() - started) / 1000);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const rtts: number[] = [];
  await fetchBytes(port, '/hello', agent);
  for (let index = 0; index < requests; index += 1) {
    const at = performance.now();
    await fetchBytes(port, '/hello', agent);
    rtts.push(performance.now() - at);
  }
  agent.destroy();
  const connects: number[] = [];
  for (let index = 0; index < Math.max(5, requests / 10); index += 1) {
    const at = performance.now();
    await fetchBytes(port, '/hello', false);
    connects.push(performance.now() - at);
  }
  return { mbps, rttMs: median(rtts), connectMs: median(connects) };
}

/** Resolves once something accepts connections on 127.0.0.1:`port`. */
async function accepting(port: number, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = tcpConnect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`${what} never listened on ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** One round: each path's figures (ssh -L absent without a sshd). */
export async function forwardFigures(
  daemon: DaemonProcess,
  sshd: Sshd | undefined,
  bytes: number,
  requests: number,
): Promise<Partial<Record<ForwardPath, ForwardFigures>>> {
  const runtime = await connect(daemon.url, { token: daemon.token });
  const dir = mkdtempSync(join(tmpdir(), 'bench-forward-'));
  let ssh: ChildProcess | undefined;
  try {
    const remote = await startWorldServer(runtime);
    const forward = await runtime.forwardPort({ remotePort: remote });
    const figures: Partial<Record<ForwardPath, ForwardFigures>> = {};
    figures.direct = await figuresOf(remote, bytes, requests);
    figures['execworld forward'] = await figuresOf(forward.port, bytes, requests);
    if (sshd !== undefined) {
      const key = join(dir, 'key');
      const keyFd = openSync(key, 'w', 0o600);
      writeSync(keyFd, sshd.privateKey);
      closeSync(keyFd);
      const local = await freePort();
      const user = process.env.USER ?? 'root';
      ssh = spawn(
        'ssh',
        [
          '-N',
          '-L',
          `127.0.0.1:${local}:127.0.0.1:${remote}`,
          '-i',
          key,
          '-p',
          String(sshd.port),
          '-o',
          'StrictHostKeyChecking=no',
          '-o',
          'UserKnownHostsFile=/dev/null',
          '-o',
          'ExitOnForwardFailure=yes',
          `${user}@127.0.0.1`,
        ],
        { stdio: 'ignore' },
      );
      await accepting(local, 'ssh -L');
      figures['ssh -L'] = await figuresOf(local, bytes, requests);
    }
    await forward.close();
    return figures;
  } finally {
    ssh?.kill('SIGTERM');
    await runtime.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}
