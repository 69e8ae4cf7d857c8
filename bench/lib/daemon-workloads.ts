/**
 * Workloads of the daemon itself: B5 stalled consumers, B7 isolation of
 * healthy sessions from a stalled one, and the memory of idle terminals.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection, type DaemonProcess } from './daemon.ts';
import { BENCH_ENV } from './peers.ts';
import type { RelayProcess } from './remote-peers.ts';
import { percentile } from './stats.ts';
import { bulkBytes } from './terminal-workloads.ts';
import { WebSocket } from 'ws';

const terminalSpec = (argv: string[]) => ({ argv, cwd: '/tmp', env: BENCH_ENV, rows: 24, cols: 80, graceMs: 1000 });
const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export interface StallFigures {
  /** RSS growth of the server from the stall's start to its peak during the stall, per stalled session, MiB. */
  rssGrowthPerSessionMiB: number;
  /** Peak RSS of the server during the stall, MiB. */
  rssPeakMiB: number;
  /** Every producer stopped while its consumer stalled. */
  blocked: boolean;
  /** Every byte arrived once the consumers resumed. */
  complete: boolean;
  wallSeconds: number;
}

/** Samples `rss` every 50 ms for `ms`, returning the peak. */
async function peakDuring(ms: number, rss: () => number): Promise<number> {
  let peak = rss();
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    await sleep(50);
    peak = Math.max(peak, rss());
  }
  return peak;
}

/** B5 on the daemon: `sessions` bulk terminals whose client stops acknowledging after 10 MB for `stallMs`. */
export async function stallDaemon(daemon: DaemonProcess, sessions: number, inputBytes: number, stallMs: number): Promise<StallFigures> {
  const connection = await Connection.open(daemon.url, daemon.token);
  const baseline = daemon.rssKiB();
  const started = nowMs();
  const expected = bulkBytes(inputBytes);
  const state = await Promise.all(
    Array.from({ length: sessions }, async () => {
      const info = await connection.call('terminal.create', terminalSpec(['/bin/sh', '-c', `head -c ${inputBytes} /dev/zero | base64`]));
      const entry = { id: info.id as string, sub: 0, received: 0, stalled: false, stallOver: false, ended: false };
      entry.sub = await connection.subscribe(
        { kind: 'terminal', id: entry.id, stream: 'output' },
        0,
        256 * 1024,
        (_offset, payload, sub) => {
          entry.sub = sub;
          entry.received += payload.length;
          if (entry.received >= 10_000_000 && !entry.stallOver) entry.stalled = true;
          if (!entry.stalled) connection.ack(entry.sub, entry.received);
        },
        () => (entry.ended = true),
      );
      return entry;
    }),
  );
  while (!state.every((entry) => entry.stalled || entry.ended)) await sleep(10);
  await sleep(300);
  const before = await Promise.all(state.map(async (entry) => (await connection.call('terminal.get', { id: entry.id })).output.end as number));
  const stallStart = daemon.rssKiB();
  const peak = await peakDuring(stallMs, () => daemon.rssKiB());
  const after = await Promise.all(state.map(async (entry) => (await connection.call('terminal.get', { id: entry.id })).output.end as number));
  for (const entry of state) {
    entry.stalled = false;
    entry.stallOver = true;
    connection.ack(entry.sub, entry.received);
  }
  const deadline = Date.now() + 120_000;
  while (!state.every((entry) => entry.ended) && Date.now() < deadline) await sleep(20);
  const wallSeconds = (nowMs() - started) / 1000;
  await Promise.all(state.map((entry) => connection.call('terminal.delete', { id: entry.id })));
  connection.close();
  void baseline;
  return {
    rssGrowthPerSessionMiB: (peak - stallStart) / 1024 / sessions,
    rssPeakMiB: peak / 1024,
    blocked: before.every((end, index) => end === after[index]),
    complete: state.every((entry) => entry.received === expected),
    wallSeconds,
  };
}

/** B5 on the minimal relay, for comparison: its client stops reading (pauses its socket) after 10 MB. */
export async function stallRelay(relay: RelayProcess, sessions: number, inputBytes: number, stallMs: number): Promise<StallFigures> {
  const baseline = relay.rssKiB();
  const started = nowMs();
  const expected = bulkBytes(inputBytes);
  const state = await Promise.all(
    Array.from({ length: sessions }, async () => {
      const query = new URLSearchParams({ argv: JSON.stringify(['/bin/sh', '-c', `head -c ${inputBytes} /dev/zero | base64`]), env: JSON.stringify(BENCH_ENV) });
      const socket = new WebSocket(`ws://127.0.0.1:${relay.port}/?${query.toString()}`);
      const entry = { socket, received: 0, stalled: false, ended: false };
      socket.on('message', (message: Buffer) => {
        if (message[0] === 1) {
          entry.received += message.length - 1;
          if (entry.received >= 10_000_000 && !entry.stalled) {
            entry.stalled = true;
            // ws has no pause(): stop reading the TCP socket so backpressure reaches the relay.
            (socket as unknown as { _socket: { pause(): void } })._socket.pause();
          }
        } else if (message[0] === 3) entry.ended = true;
      });
      await new Promise((resolve) => socket.once('open', resolve));
      return entry;
    }),
  );
  while (!state.every((entry) => entry.stalled || entry.ended)) await sleep(10);
  await sleep(300);
  const stallStart = relay.rssKiB();
  const peak = await peakDuring(stallMs, () => relay.rssKiB());
  for (const entry of state) (entry.socket as unknown as { _socket: { resume(): void } })._socket.resume();
  const deadline = Date.now() + 120_000;
  while (!state.every((entry) => entry.ended) && Date.now() < deadline) await sleep(20);
  const wallSeconds = (nowMs() - started) / 1000;
  for (const entry of state) entry.socket.close();
  void baseline;
  return {
    rssGrowthPerSessionMiB: (peak - stallStart) / 1024 / sessions,
    rssPeakMiB: peak / 1024,
    // The relay's own queue is bounded by its 1 MiB high-water mark; the kernel's socket buffers hold the rest.
    blocked: true,
    complete: state.every((entry) => entry.received === expected),
    wallSeconds,
  };
}

/** Echo p99 over `healthy` sessions on one connection, with or without a stalled bulk session beside them. */
export async function isolation(daemon: DaemonProcess, healthy: number, withStalled: boolean, roundTrips: number): Promise<{ p50: number; p99: number }> {
  const connection = await Connection.open(daemon.url, daemon.token);
  let stalledId: string | undefined;
  if (withStalled) {
    const info = await connection.call('terminal.create', terminalSpec(['/bin/sh', '-c', 'head -c 2000000000 /dev/zero | base64']));
    stalledId = info.id;
    // Subscribed and never acknowledged: it fills its window and its ring, then blocks.
    await connection.subscribe({ kind: 'terminal', id: info.id, stream: 'output' }, 0, 1024 * 1024, () => {}, () => {});
  }
  const sessions = await Promise.all(
    Array.from({ length: healthy }, async () => {
      const info = await connection.call('terminal.create', terminalSpec(['/bin/sh', '-c', 'stty raw -echo; printf READY; exec cat']));
      const session = { id: info.id as string, ready: false, waiting: undefined as undefined | { byte: number; resolve: () => void } };
      let received = 0;
      await connection.subscribe({ kind: 'terminal', id: info.id, stream: 'output' }, 0, 1024 * 1024, (_offset, payload, sub) => {
        received += payload.length;
        connection.ack(sub, received);
        if (!session.ready) {
          session.ready = payload.includes('READY');
          return;
        }
        if (session.waiting !== undefined && payload.includes(session.waiting.byte)) {
          const { resolve } = session.waiting;
          session.waiting = undefined;
          resolve();
        }
      }, () => {});
      return session;
    }),
  );
  while (!sessions.every((session) => session.ready)) await sleep(5);
  await sleep(200);
  const samples: number[] = [];
  for (let index = 0; index < roundTrips + 100; index += 1) {
    const session = sessions[index % sessions.length]!;
    const byte = 97 + (index % 26);
    const arrived = new Promise<void>((resolve) => (session.waiting = { byte, resolve }));
    const started = nowMs();
    void connection.call('terminal.input', { id: session.id, data: String.fromCharCode(byte) });
    await arrived;
    if (index >= 100) samples.push(nowMs() - started);
  }
  await Promise.all([...sessions.map((session) => session.id), ...(stalledId === undefined ? [] : [stalledId])].map((id) => connection.call('terminal.delete', { id })));
  connection.close();
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** RSS of the daemon with `count` idle bash terminals at their prompt. */
export async function idleTerminals(daemon: DaemonProcess, count: number): Promise<{ totalMiB: number; perTerminalKiB: number }> {
  const connection = await Connection.open(daemon.url, daemon.token);
  await sleep(200);
  const baseline = daemon.rssKiB();
  const ids: string[] = [];
  let prompts = 0;
  for (let index = 0; index < count; index += 1) {
    const info = await connection.call('terminal.create', { ...terminalSpec(['/bin/bash', '--noprofile', '--norc', '-i']), env: { ...BENCH_ENV, PS1: '$ ' } });
    ids.push(info.id);
    let seen = '';
    let counted = false;
    await connection.subscribe({ kind: 'terminal', id: info.id, stream: 'output' }, 0, 64 * 1024, (_offset, payload, sub) => {
      seen += payload.toString('latin1');
      connection.ack(sub, seen.length);
      if (!counted && seen.endsWith('$ ')) {
        counted = true;
        prompts += 1;
      }
    }, () => {});
  }
  while (prompts < count) await sleep(20);
  await sleep(500);
  const rss = daemon.rssKiB();
  await Promise.all(ids.map((id) => connection.call('terminal.delete', { id })));
  connection.close();
  return { totalMiB: rss / 1024, perTerminalKiB: (rss - baseline) / count };
}
