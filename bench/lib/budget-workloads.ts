/**
 * The daemon's memory under the three floods its budgets bound: a WebSocket
 * client that sends calls and never reads, input to a program that does not
 * read it, and collect-mode processes that print more than they keep.
 * Each runs against a fresh daemon process, whose RSS is sampled throughout.
 */
import { WebSocket } from 'ws';
import { WS_SUBPROTOCOL } from '@execworld/sdk/protocol';
import { startDaemonProcess, type DaemonProcess } from './daemon.ts';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface FloodFigures {
  /** Daemon RSS before the flood, MiB. */
  beforeMiB: number;
  /** Highest daemon RSS seen during it, MiB. */
  peakMiB: number;
  /** What the budget did: refusals, or the disconnect. */
  outcome: string;
}

async function request(daemon: DaemonProcess, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${daemon.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${daemon.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: await response.json().catch(() => undefined) };
}

function sampler(daemon: DaemonProcess): { peakMiB(): number; stop(): void } {
  let peak = daemon.rssKiB();
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, daemon.rssKiB());
    } catch (_error) {
      // The daemon is stopping.
    }
  }, 20);
  return { peakMiB: () => peak / 1024, stop: () => clearInterval(timer) };
}

async function openSocket(daemon: DaemonProcess): Promise<WebSocket> {
  const socket = new WebSocket(`${daemon.url.replace(/^http/, 'ws')}/v1/connect`, [WS_SUBPROTOCOL], { headers: { authorization: `Bearer ${daemon.token}` } });
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  return socket;
}

/** A client sends `terminal.list` calls (about 1 KiB answers) for up to `seconds` and never reads. */
export async function nonReadingClient(seconds: number): Promise<FloodFigures> {
  const daemon = await startDaemonProcess();
  try {
    for (let index = 0; index < 3; index += 1)
      await request(daemon, 'POST', '/v1/terminals', { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 });
    const beforeMiB = daemon.rssKiB() / 1024;
    const rss = sampler(daemon);
    const socket = await openSocket(daemon);
    let closedAt: number | undefined;
    const started = Date.now();
    socket.on('close', () => (closedAt = Date.now()));
    socket.on('error', () => undefined);
    (socket as unknown as { _socket: { pause(): void } })._socket.pause();
    const call = JSON.stringify({ t: 'call', id: 1, op: 'terminal.list', params: {} });
    let sent = 0;
    while (closedAt === undefined && Date.now() - started < seconds * 1000) {
      for (let index = 0; index < 500; index += 1) socket.send(call);
      sent += 500;
      socket.pong();
      await sleep(1);
    }
    rss.stop();
    socket.terminate();
    const outcome =
      closedAt === undefined
        ? `still connected after ${seconds} s, ${sent} calls sent`
        : `disconnected after ${((closedAt - started) / 1000).toFixed(1)} s, ${sent} calls sent`;
    return { beforeMiB, peakMiB: rss.peakMiB(), outcome };
  } finally {
    await daemon.stop();
  }
}

/** `writes` concurrent 1 MiB inputs to a terminal whose program never reads. */
export async function inputFlood(writes: number): Promise<FloodFigures> {
  const daemon = await startDaemonProcess();
  try {
    const terminal = await request(daemon, 'POST', '/v1/terminals', {
      argv: ['/bin/sh', '-c', 'stty raw -echo; exec sleep 300'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 500,
    });
    const beforeMiB = daemon.rssKiB() / 1024;
    const rss = sampler(daemon);
    const socket = await openSocket(daemon);
    const answers = { ok: 0, refused: 0 };
    socket.on('message', (raw: Buffer, binary) => {
      if (binary) return;
      const message = JSON.parse(raw.toString()) as { t: string; error?: { code: string } };
      if (message.t === 'result') answers.ok += 1;
      else if (message.error?.code === 'LIMIT_EXCEEDED') answers.refused += 1;
    });
    const data = 'x'.repeat(1024 * 1024);
    for (let id = 1; id <= writes; id += 1) socket.send(JSON.stringify({ t: 'call', id, op: 'terminal.input', params: { id: terminal.body.id, data } }));
    const deadline = Date.now() + 60_000;
    while (answers.refused + answers.ok < writes - 8 && Date.now() < deadline) await sleep(20);
    rss.stop();
    socket.terminate();
    await request(daemon, 'DELETE', `/v1/terminals/${terminal.body.id}`);
    return { beforeMiB, peakMiB: rss.peakMiB(), outcome: `${answers.refused} of ${writes} writes refused with 429` };
  } finally {
    await daemon.stop();
  }
}

/** Collect-mode processes, each printing 300 MB and keeping a 256 MiB tail, until one is refused. */
export async function collectFlood(): Promise<FloodFigures> {
  const daemon = await startDaemonProcess();
  try {
    const beforeMiB = daemon.rssKiB() / 1024;
    const rss = sampler(daemon);
    const ids: string[] = [];
    let refusedAt: number | undefined;
    for (let index = 0; index < 16 && refusedAt === undefined; index += 1) {
      const created = await request(daemon, 'POST', '/v1/processes', {
        argv: ['/bin/sh', '-c', 'head -c 300000000 /dev/zero'],
        cwd: '/tmp',
        stdio: { stdin: 'ignore', stdout: { maxBytes: 256 * 1024 * 1024 }, stderr: 'pipe' },
        graceMs: 500,
      });
      if (created.status === 201) ids.push(created.body.id);
      else refusedAt = index + 1;
    }
    for (const id of ids) await request(daemon, 'GET', `/v1/processes/${id}/done?timeoutMs=60000`);
    rss.stop();
    for (const id of ids) await request(daemon, 'DELETE', `/v1/processes/${id}`);
    return {
      beforeMiB,
      peakMiB: rss.peakMiB(),
      outcome: refusedAt === undefined ? `${ids.length} processes, none refused` : `${ids.length} processes admitted, number ${refusedAt} refused with 429`,
    };
  } finally {
    await daemon.stop();
  }
}
