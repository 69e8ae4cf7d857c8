/**
 * Terminal workloads (performance.md Part 3): B1 echo, B2 bulk, B3 prompt,
 * B4 tail, plus foreground inspection and close of an idle shell. Each takes
 * a peer and returns its figures for one round.
 */
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { sessionPids } from '../../test/helpers/proc.ts';
import { percentile } from './stats.ts';
import type { TerminalPeer, TerminalSession } from './peers.ts';

const BASH = ['/bin/bash', '--noprofile', '--norc', '-i'];
// eslint-disable-next-line no-control-regex -- terminal escapes are control characters
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** Resolves once the accumulated output satisfies `done`. */
function watch(session: TerminalSession, done: (text: string) => boolean, timeoutMs = 20_000): Promise<string> {
  let text = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no expected output within ${timeoutMs} ms; got ${JSON.stringify(text.slice(-200))}`)), timeoutMs);
    session.onData((chunk) => {
      text += chunk.toString('latin1');
      if (done(text)) {
        clearTimeout(timer);
        resolve(text);
      }
    });
  });
}

/** A wait that fails the workload instead of hanging the whole run. */
async function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`${what} within ${timeoutMs} ms`)), timeoutMs)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const atPrompt = (text: string): boolean => text.replace(ESCAPES, '').endsWith('$ ');

/** B3: spawn call to the first prompt's bytes, ms. */
export async function promptMs(peer: TerminalPeer): Promise<number> {
  const started = nowMs();
  const session = await peer.open(BASH, { PS1: '$ ' });
  await watch(session, atPrompt);
  const elapsed = nowMs() - started;
  // Leave the way a user would, so no peer's close ladder is part of this workload.
  session.write('exit\r');
  await session.exited;
  await session.close();
  return elapsed;
}

/** B1: strictly sequential one-byte round trips through `cat` in a raw terminal. */
export async function echo(peer: TerminalPeer, measured = 2000, warmup = 200): Promise<{ p50: number; p99: number }> {
  const session = await peer.open(['/bin/sh', '-c', 'stty raw -echo; printf READY; exec cat']);
  let waiting: { byte: number; resolve: () => void } | undefined;
  let ready = false;
  let seen = '';
  session.onData((chunk) => {
    if (!ready) {
      seen += chunk.toString('latin1');
      ready = seen.includes('READY');
      return;
    }
    if (waiting !== undefined && chunk.includes(waiting.byte)) {
      const { resolve } = waiting;
      waiting = undefined;
      resolve();
    }
  });
  const deadline = Date.now() + 10_000;
  while (!ready && Date.now() < deadline) await sleep(5);
  await sleep(200);
  const samples: number[] = [];
  for (let index = 0; index < warmup + measured; index += 1) {
    const byte = 97 + (index % 26);
    const arrived = new Promise<void>((resolve) => (waiting = { byte, resolve }));
    const started = nowMs();
    session.write(String.fromCharCode(byte));
    await arrived;
    if (index >= warmup) samples.push(nowMs() - started);
  }
  await session.close();
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** Bytes the bulk workload puts through a terminal with onlcr: base64 lines of 76 plus CRLF. */
export function bulkBytes(inputBytes: number): number {
  const encoded = 4 * Math.ceil(inputBytes / 3);
  return encoded + 2 * Math.ceil(encoded / 76);
}

/** B2: MB/s from the first to the last byte of `head -c N /dev/zero | base64`. */
export async function bulk(peer: TerminalPeer, inputBytes: number): Promise<{ mbps: number; complete: boolean }> {
  const session = await peer.open(['/bin/sh', '-c', `head -c ${inputBytes} /dev/zero | base64`]);
  let bytes = 0;
  let first = 0;
  let last = 0;
  session.onData((chunk) => {
    const now = nowMs();
    if (bytes === 0) first = now;
    last = now;
    bytes += chunk.length;
  });
  await session.exited;
  await sleep(100);
  await session.close();
  return { mbps: bytes / 1e6 / ((last - first) / 1000), complete: bytes === bulkBytes(inputBytes) };
}

/** The PTY ceiling without Node: Python's pty.fork and 64 KiB reads of the same workload. */
export function ptyCeilingMbps(inputBytes: number): number {
  const script = [
    'import os, pty, sys, time',
    'pid, fd = pty.fork()',
    'if pid == 0:',
    `    os.execv('/bin/sh', ['/bin/sh', '-c', 'head -c ${inputBytes} /dev/zero | base64'])`,
    'total = 0; first = None; last = None',
    'while True:',
    '    try: data = os.read(fd, 65536)',
    '    except OSError: break',
    '    if not data: break',
    '    now = time.perf_counter()',
    '    first = now if first is None else first',
    '    last = now',
    '    total += len(data)',
    'os.waitpid(pid, 0)',
    'print(total / 1e6 / (last - first))',
  ].join('\n');
  const result = spawnSync('python3', ['-c', script], { encoding: 'utf8', timeout: 120_000 });
  return Number(result.stdout.trim());
}

/** B4: a 41 KB burst right before exit; counts runs that lost bytes. */
export async function tail(peer: TerminalPeer, runs: number): Promise<{ truncated: number; exitP50: number }> {
  const expected = bulkBytes(30_000);
  let truncated = 0;
  const exitMs: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    const started = nowMs();
    const session = await peer.open(['/bin/sh', '-c', 'head -c 30000 /dev/zero | base64']);
    let bytes = 0;
    session.onData((chunk) => (bytes += chunk.length));
    await session.exited;
    exitMs.push(nowMs() - started);
    await sleep(100);
    if (bytes !== expected) truncated += 1;
    await session.close();
  }
  return { truncated, exitP50: percentile(exitMs, 50) };
}

/** inspectForeground on an idle bash prompt, ms per call. */
export async function inspect(peer: TerminalPeer, calls = 200): Promise<{ p50: number; p99: number } | undefined> {
  const session = await peer.open(BASH, { PS1: '$ ' });
  if (session.inspect === undefined) {
    await session.close();
    return undefined;
  }
  await watch(session, atPrompt);
  const samples: number[] = [];
  for (let call = 0; call < calls; call += 1) {
    const started = nowMs();
    await session.inspect();
    samples.push(nowMs() - started);
  }
  await session.close();
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** close() of an idle interactive bash at its prompt, ms; and whether anything of its session was left. */
export async function closeIdle(peer: TerminalPeer): Promise<{ ms: number; leftovers: number }> {
  const session = await peer.open(BASH, { PS1: '$ ' });
  await watch(session, atPrompt);
  await sleep(50);
  const started = nowMs();
  await session.close();
  const ms = nowMs() - started;
  // A peer without a pid (the relay's terminal is in another process) cannot be checked here.
  return { ms, leftovers: session.pid > 0 ? sessionPids(session.pid).length : Number.NaN };
}

/** B8: resize until the child's SIGWINCH trap prints, ms per resize; undefined for a peer without resize. */
export async function resizeLatency(peer: TerminalPeer, count = 50): Promise<number[] | undefined> {
  const session = await peer.open(['/bin/sh', '-c', "trap 'printf W' WINCH; printf READY; while :; do sleep 1 & wait; done"]);
  if (session.resize === undefined) {
    await session.close();
    return undefined;
  }
  let text = '';
  let notify: (() => void) | undefined;
  session.onData((chunk) => {
    text += chunk.toString('latin1');
    notify?.();
  });
  while (!text.includes('READY')) await sleep(5);
  await sleep(100);
  const samples: number[] = [];
  for (let index = 0; index < count; index += 1) {
    const seen = text.split('W').length;
    const arrived = new Promise<void>((resolve) => (notify = () => text.split('W').length > seen && resolve()));
    const started = nowMs();
    // Never the opening 80 columns: a resize to the current size sends no SIGWINCH.
    await session.resize(81 + (index % 2), 24);
    await withTimeout(arrived, 5000, `${peer.name}: no SIGWINCH after a resize`);
    samples.push(nowMs() - started);
  }
  await session.close();
  return samples;
}

/** B8: SIGINT to a foreground sleep until its exit is seen, ms; undefined for a peer without signals. */
export async function interruptLatency(peer: TerminalPeer, runs = 10): Promise<number[] | undefined> {
  const samples: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    const session = await peer.open(['/bin/sh', '-c', 'printf READY; exec sleep 30']);
    if (session.interrupt === undefined) {
      await session.close();
      return undefined;
    }
    await watch(session, (text) => text.includes('READY'));
    await sleep(20);
    const started = nowMs();
    await session.interrupt();
    await withTimeout(session.exited, 5000, `${peer.name}: no exit after SIGINT`);
    samples.push(nowMs() - started);
    await session.close();
  }
  return samples;
}
