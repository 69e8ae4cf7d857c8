/**
 * Workloads of the remote path, at the SDK's public API: B5 stalled
 * consumers, B6 resume after a cut connection, B7 isolation of healthy
 * sessions from a stalled one, and the memory of idle terminals.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { connect, type RemoteRuntime, type RemoteTerminal } from '@execworld/sdk';
import { FaultProxy } from '../../test/helpers/proxy.ts';
import type { DaemonProcess } from './daemon.ts';
import { BENCH_ENV } from './peers.ts';
import type { RelayProcess } from './remote-peers.ts';
import { percentile } from './stats.ts';
import { bulkBytes } from './terminal-workloads.ts';

const terminalSpec = (argv: string[], env: Record<string, string> = {}) => ({
  argv,
  cwd: '/tmp',
  env: { ...BENCH_ENV, ...env },
  rows: 24,
  cols: 80,
  graceMs: 1000,
});
const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;
const selfRssKiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);

export interface StallFigures {
  /** RSS growth of the server from the stall's start to its peak during the stall, per stalled session, MiB. */
  rssGrowthPerSessionMiB: number;
  /** Peak RSS of the server during the stall, MiB. */
  rssPeakMiB: number;
  /** RSS growth of the client during the stall, per stalled session, MiB. */
  clientGrowthPerSessionMiB: number;
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

/** B5 through the SDK: `sessions` bulk terminals whose reader pauses its output after 10 MB for `stallMs`. */
export async function stallDaemon(daemon: DaemonProcess, sessions: number, inputBytes: number, stallMs: number): Promise<StallFigures> {
  const runtime = await connect(daemon.url, { token: daemon.token });
  const started = nowMs();
  const expected = bulkBytes(inputBytes);
  const state = await Promise.all(
    Array.from({ length: sessions }, async () => {
      const terminal = await runtime.spawnTerminal(terminalSpec(['/bin/sh', '-c', `head -c ${inputBytes} /dev/zero | base64`]));
      const entry = { terminal, received: 0, stalled: false, stallOver: false, ended: false };
      terminal.output.on('data', (chunk: Buffer) => {
        entry.received += chunk.length;
        if (entry.received >= 10_000_000 && !entry.stallOver && !entry.stalled) {
          entry.stalled = true;
          terminal.output.pause();
        }
      });
      terminal.output.on('end', () => (entry.ended = true));
      return entry;
    }),
  );
  while (!state.every((entry) => entry.stalled || entry.ended)) await sleep(10);
  await sleep(300);
  const ends = async (): Promise<number[]> => Promise.all(state.map(async (entry) => (await entry.terminal.info()).output.end));
  const before = await ends();
  const serverStart = daemon.rssKiB();
  const clientStart = selfRssKiB();
  let clientPeak = clientStart;
  const peak = await peakDuring(stallMs, () => {
    clientPeak = Math.max(clientPeak, selfRssKiB());
    return daemon.rssKiB();
  });
  const after = await ends();
  for (const entry of state) {
    entry.stallOver = true;
    entry.stalled = false;
    entry.terminal.output.resume();
  }
  const deadline = Date.now() + 120_000;
  while (!state.every((entry) => entry.ended) && Date.now() < deadline) await sleep(20);
  const wallSeconds = (nowMs() - started) / 1000;
  await runtime.dispose();
  return {
    rssGrowthPerSessionMiB: (peak - serverStart) / 1024 / sessions,
    rssPeakMiB: peak / 1024,
    clientGrowthPerSessionMiB: (clientPeak - clientStart) / 1024 / sessions,
    blocked: before.every((end, index) => end === after[index]),
    complete: state.every((entry) => entry.received === expected),
    wallSeconds,
  };
}

/** B5 on the minimal relay, for comparison: its client stops reading (pauses its socket) after 10 MB. */
export async function stallRelay(relay: RelayProcess, sessions: number, inputBytes: number, stallMs: number): Promise<StallFigures> {
  const started = nowMs();
  const expected = bulkBytes(inputBytes);
  const state = await Promise.all(
    Array.from({ length: sessions }, async () => {
      const query = new URLSearchParams({
        argv: JSON.stringify(['/bin/sh', '-c', `head -c ${inputBytes} /dev/zero | base64`]),
        env: JSON.stringify(BENCH_ENV),
      });
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
  const serverStart = relay.rssKiB();
  const clientStart = selfRssKiB();
  let clientPeak = clientStart;
  const peak = await peakDuring(stallMs, () => {
    clientPeak = Math.max(clientPeak, selfRssKiB());
    return relay.rssKiB();
  });
  for (const entry of state) (entry.socket as unknown as { _socket: { resume(): void } })._socket.resume();
  const deadline = Date.now() + 120_000;
  while (!state.every((entry) => entry.ended) && Date.now() < deadline) await sleep(20);
  const wallSeconds = (nowMs() - started) / 1000;
  for (const entry of state) entry.socket.close();
  return {
    rssGrowthPerSessionMiB: (peak - serverStart) / 1024 / sessions,
    rssPeakMiB: peak / 1024,
    clientGrowthPerSessionMiB: (clientPeak - clientStart) / 1024 / sessions,
    // The relay's own queue stops at its 1 MiB high-water mark; the kernel's socket buffers hold the rest.
    blocked: true,
    complete: state.every((entry) => entry.received === expected),
    wallSeconds,
  };
}

interface EchoSession {
  readonly terminal: RemoteTerminal;
  waiting: { byte: number; resolve: () => void } | undefined;
}

async function echoSession(runtime: RemoteRuntime): Promise<EchoSession> {
  const terminal = await runtime.spawnTerminal(terminalSpec(['/bin/sh', '-c', 'stty raw -echo; printf READY; exec cat']));
  const session: EchoSession = { terminal, waiting: undefined };
  let ready = false;
  await new Promise<void>((resolve) => {
    terminal.output.on('data', (chunk: Buffer) => {
      if (!ready) {
        ready = chunk.includes('READY');
        if (ready) resolve();
        return;
      }
      const waiting = session.waiting;
      if (waiting !== undefined && chunk.includes(waiting.byte)) {
        session.waiting = undefined;
        waiting.resolve();
      }
    });
  });
  return session;
}

/** One round trip of one byte through `session`, ms. */
async function roundTrip(session: EchoSession, byte: number): Promise<number> {
  const arrived = new Promise<void>((resolve) => (session.waiting = { byte, resolve }));
  const started = nowMs();
  void session.terminal.write(String.fromCharCode(byte));
  await arrived;
  return nowMs() - started;
}

/** B7: echo p50/p99 over `healthy` sessions on one SDK connection, with or without a stalled bulk session beside them. */
export async function isolation(daemon: DaemonProcess, healthy: number, withStalled: boolean, roundTrips: number): Promise<{ p50: number; p99: number }> {
  const runtime = await connect(daemon.url, { token: daemon.token });
  if (withStalled) {
    const stalled = await runtime.spawnTerminal(terminalSpec(['/bin/sh', '-c', 'head -c 2000000000 /dev/zero | base64']));
    // Never read: it fills its window and its ring, then blocks.
    stalled.output.pause();
  }
  const sessions = await Promise.all(Array.from({ length: healthy }, () => echoSession(runtime)));
  await sleep(200);
  const samples: number[] = [];
  for (let index = 0; index < roundTrips + 100; index += 1) {
    const rtt = await roundTrip(sessions[index % sessions.length]!, 97 + (index % 26));
    if (index >= 100) samples.push(rtt);
  }
  await runtime.dispose();
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** RSS of the daemon with `count` idle bash terminals at their prompt. */
export async function idleTerminals(daemon: DaemonProcess, count: number): Promise<{ totalMiB: number; perTerminalKiB: number }> {
  const runtime = await connect(daemon.url, { token: daemon.token });
  await sleep(200);
  const baseline = daemon.rssKiB();
  let prompts = 0;
  for (let index = 0; index < count; index += 1) {
    const terminal = await runtime.spawnTerminal(terminalSpec(['/bin/bash', '--noprofile', '--norc', '-i'], { PS1: '$ ' }));
    let seen = '';
    terminal.output.on('data', (chunk: Buffer) => {
      if (seen.endsWith('$ ')) return;
      seen += chunk.toString('latin1');
      if (seen.endsWith('$ ')) prompts += 1;
    });
  }
  while (prompts < count) await sleep(20);
  await sleep(500);
  const rss = daemon.rssKiB();
  await runtime.dispose();
  return { totalMiB: rss / 1024, perTerminalKiB: (rss - baseline) / count };
}

export interface ResumeFigures {
  cuts: number;
  /** Bytes received minus bytes produced: negative is loss, positive is repetition. */
  byteDifference: number;
  /** The received bytes hash the same as the produced ones. */
  exact: boolean;
  /** From a cut to the next byte delivered, ms (median over cuts). */
  reattachMs: number;
  /** Echo round trip that spanned a cut, ms (median over cuts). */
  echoAcrossCutMs: number;
}

/** B6: the SDK through a proxy that cuts the connection mid-bulk and mid-echo. */
export async function resume(daemon: DaemonProcess, lines: number, cuts: number): Promise<ResumeFigures> {
  const proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
  const runtime = await connect(proxy.url, { token: daemon.token, reconnectInitialDelayMs: 1, reconnectMaxDelayMs: 20 });
  const reference = execFileSync('seq', ['1', String(lines)], { maxBuffer: 1024 * 1024 * 1024 });
  // -onlcr: the terminal passes the bytes through as seq wrote them.
  const terminal = await runtime.spawnTerminal(terminalSpec(['/bin/sh', '-c', `stty -onlcr; seq 1 ${lines}`]));
  const hash = createHash('sha256');
  let received = 0;
  let cutAt: number | undefined;
  const reattach: number[] = [];
  terminal.output.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    received += chunk.length;
    if (cutAt !== undefined) {
      reattach.push(nowMs() - cutAt);
      cutAt = undefined;
    }
  });
  let made = 0;
  const exited = terminal.done;
  let finished = false;
  void exited.finally(() => (finished = true));
  while (!finished && made < cuts) {
    await sleep(100 + Math.random() * 100);
    if (finished || received === 0) continue;
    cutAt = nowMs();
    proxy.cut();
    made += 1;
  }
  await exited;
  await sleep(100);
  const produced = reference.length;
  const exact = hash.digest('hex') === createHash('sha256').update(reference).digest('hex');
  await terminal.terminate();

  const echo = await echoSession(runtime);
  const across: number[] = [];
  for (let cut = 0; cut < Math.min(cuts, 10); cut += 1) {
    for (let trip = 0; trip < 20; trip += 1) await roundTrip(echo, 97 + (trip % 26));
    const arrived = roundTrip(echo, 122);
    proxy.cut();
    across.push(await arrived);
  }
  await runtime.dispose();
  await proxy.close();
  return {
    cuts: made,
    byteDifference: received - produced,
    exact,
    reattachMs: percentile(reattach, 50),
    echoAcrossCutMs: percentile(across, 50),
  };
}
