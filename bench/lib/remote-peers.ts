/**
 * Remote terminal peers: the daemon through the SDK (warm and cold) and over
 * REST, and the minimal ws relay. The servers run in child processes; the
 * benchmark process is the client, measured at its public API.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import type { DaemonProcess } from './daemon.ts';
import { BENCH_ENV, CLOSE_GRACE_MS, seamSession, type TerminalPeer, type TerminalSession } from './peers.ts';

/** Delivers chunks to listeners; what arrives before the first listener is held for it. */
function fanout(): { push: (chunk: Buffer) => void; onData: (listener: (chunk: Buffer) => void) => void } {
  const listeners: ((chunk: Buffer) => void)[] = [];
  let backlog: Buffer[] | undefined = [];
  return {
    push: (chunk) => {
      if (backlog !== undefined) backlog.push(chunk);
      else for (const listener of listeners) listener(chunk);
    },
    onData: (listener) => {
      listeners.push(listener);
      if (backlog !== undefined) {
        const held = backlog;
        backlog = undefined;
        for (const chunk of held) listener(chunk);
      }
    },
  };
}

function spec(argv: readonly string[], env?: Record<string, string>) {
  return { argv, cwd: '/tmp', env: { ...BENCH_ENV, ...env }, rows: 24, cols: 80, graceMs: CLOSE_GRACE_MS };
}

/** The SDK's RemoteRuntime over one connection to the daemon: a new terminal is a call on it. */
export async function remotePeer(daemon: DaemonProcess): Promise<TerminalPeer & { runtime: RemoteRuntime }> {
  const runtime = await connect(daemon.url, { token: daemon.token });
  return {
    name: 'remote',
    closeIsQuiescence: true,
    runtime,
    open: async (argv, env) => seamSession(await runtime.spawnTerminal(spec(argv, env))),
    dispose: () => runtime.dispose(),
  };
}

/** The SDK with a fresh connection per terminal: connect, authenticate, spawn. */
export function remoteColdPeer(daemon: DaemonProcess): TerminalPeer {
  return {
    name: 'remote-cold',
    closeIsQuiescence: true,
    async open(argv, env) {
      const runtime = await connect(daemon.url, { token: daemon.token });
      const session = seamSession(await runtime.spawnTerminal(spec(argv, env)));
      return {
        ...session,
        close: async () => {
          await session.close();
          runtime.close();
        },
      };
    },
    dispose: () => Promise.resolve(),
  };
}

/** The daemon over REST: writes are POSTs, output is a long-poll loop. */
export function daemonRestPeer(daemon: DaemonProcess): TerminalPeer {
  const headers = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown): Promise<any> => {
    const response = await fetch(`${daemon.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return response.json();
  };
  return {
    name: 'daemon-rest',
    closeIsQuiescence: true,
    async open(argv, env) {
      const info = await call('POST', '/v1/terminals', spec(argv, env));
      const output = fanout();
      let stop = false;
      const exited = (async () => {
        let from = 0;
        while (!stop) {
          const read = await call('GET', `/v1/terminals/${info.id}/output?from=${from}&waitMs=10000`);
          if (read.data.length > 0) output.push(Buffer.from(read.data, 'base64'));
          from = read.next;
          if (read.ended) return;
        }
      })();
      return {
        pid: info.pid,
        onData: output.onData,
        write: (data) => void call('POST', `/v1/terminals/${info.id}/input`, { data }),
        inspect: () => call('GET', `/v1/terminals/${info.id}/foreground`),
        close: async () => {
          stop = true;
          await call('DELETE', `/v1/terminals/${info.id}`);
        },
        exited,
      } satisfies TerminalSession;
    },
    dispose: () => Promise.resolve(),
  };
}

export interface RelayProcess {
  readonly port: number;
  readonly pid: number;
  rssKiB(): number;
  stop(): Promise<void>;
}

export async function startRelay(): Promise<RelayProcess> {
  const script = fileURLToPath(new URL('../relay/ws-relay.ts', import.meta.url));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
    child.once('exit', () => reject(new Error('relay exited')));
  });
  return {
    port,
    pid: child.pid!,
    rssKiB: () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]),
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

/** The minimal relay: a new WebSocket per terminal. */
export function relayPeer(relay: RelayProcess): TerminalPeer {
  return {
    name: 'ws-relay',
    closeIsQuiescence: false,
    open(argv, env) {
      const query = new URLSearchParams({ argv: JSON.stringify(argv), env: JSON.stringify({ ...BENCH_ENV, ...env }) });
      const socket = new WebSocket(`ws://127.0.0.1:${relay.port}/?${query.toString()}`);
      const output = fanout();
      const exited = new Promise<void>((resolve) => {
        socket.on('message', (message: Buffer) => {
          if (message[0] === 1) output.push(message.subarray(1));
          else if (message[0] === 3) resolve();
        });
        socket.once('close', () => resolve());
      });
      return new Promise((resolve, reject) => {
        socket.once('error', reject);
        socket.once('open', () =>
          resolve({
            pid: 0,
            onData: output.onData,
            write: (data) => socket.send(Buffer.concat([Buffer.from([0]), Buffer.from(data)])),
            close: async () => {
              if (socket.readyState === socket.CLOSED) return;
              socket.close();
              await new Promise((done) => socket.once('close', done));
            },
            exited,
          }),
        );
      });
    },
    dispose: () => Promise.resolve(),
  };
}
