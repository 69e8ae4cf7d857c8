/**
 * What the takeover tests share: the programs they keep running (counters
 * printing 1, 2, 3, … until a file exists), reads of everything a session
 * retains, the daemon's control socket and `serve --takeover`, and a run of
 * takeovers in a row with the daemon's descriptors and memory after each.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { expect } from 'vitest';
import { BIN, callDaemon, DAEMON_NODE_FLAGS, type DaemonProcess } from './daemon-process.ts';
import { waitFor } from './wait.ts';

/**
 * A terminal whose program prints 1, 2, 3, … a line each, until `stop` exists, then exits with `code`.
 * Fifty lines a second: each line forks a sleep, and faster loops in several sessions took the
 * machine's CPU from the daemon and the new builds a takeover starts.
 */
export function counter(stop: string, code: number): { argv: string[]; rows: number; cols: number } {
  return { argv: ['sh', '-c', `i=0; while [ ! -e ${stop} ]; do i=$((i+1)); echo $i; sleep 0.02; done; exit ${code}`], rows: 24, cols: 80 };
}

/** The whole output of terminal `id` from offset 0, as the daemon retains it. */
export async function outputOf(daemon: DaemonProcess, id: string): Promise<{ text: string; gap: unknown; ended: boolean }> {
  let text = '';
  let from = 0;
  for (;;) {
    const read = await callDaemon(daemon, 'GET', `/v1/terminals/${id}/output?from=${from}&maxBytes=1048576`);
    expect(read.gap).toBeNull();
    text += Buffer.from(read.data, 'base64').toString('utf8');
    if (read.next === from || read.ended) return { text, gap: read.gap, ended: read.ended };
    from = read.next;
  }
}

/** The numbers a counter printed, checked to run 1, 2, 3, … with none missing or repeated. */
export function contiguous(text: string): number[] {
  const numbers = text
    .split(/\r?\n/)
    .filter((line) => line !== '')
    .map(Number);
  expect(numbers.length).toBeGreaterThan(0);
  numbers.forEach((value, index) => expect(value).toBe(index + 1));
  return numbers;
}

/** The whole of `stream` of process `id` from offset 0, as the daemon retains it. */
export async function processOutput(daemon: DaemonProcess, id: string, stream: 'stdout' | 'stderr'): Promise<{ text: string; ended: boolean }> {
  let text = '';
  let from = 0;
  for (;;) {
    const read = await callDaemon(daemon, 'GET', `/v1/processes/${id}/output/${stream}?from=${from}&maxBytes=1048576`);
    expect(read.gap).toBeNull();
    text += Buffer.from(read.data, 'base64').toString('utf8');
    if (read.next === from || read.ended) return { text, ended: read.ended };
    from = read.next;
  }
}

/** A managed process that prints 1, 2, 3, … a line each on stdout and on stderr, until `stop` exists, then exits with `code`. */
export function processCounter(stop: string, code: number): { argv: string[] } {
  return { argv: ['sh', '-c', `i=0; while [ ! -e ${stop} ]; do i=$((i+1)); echo $i; echo $i >&2; sleep 0.02; done; exit ${code}`] };
}

/** One request on the daemon's takeover control socket; the JSON lines it answered. */
export function control(stateDir: string, request: object): Promise<Record<string, unknown>[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(join(stateDir, 'takeover.sock'));
    let text = '';
    socket.on('connect', () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    socket.on('error', reject);
    socket.on('close', () =>
      resolve(
        text
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Record<string, unknown>),
      ),
    );
  });
}

/** `execworld serve --takeover` of this checkout (or of the build whose entry is `entry`); its exit status and output. */
export function requestTakeover(stateDir: string, entry = BIN): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...DAEMON_NODE_FLAGS, entry, 'serve', '--takeover', '--state-dir', stateDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** The daemon's children that are zombies: each previous image's helpers (its session watcher) are collected. */
export function zombies(daemon: DaemonProcess): number[] {
  return readFileSync(`/proc/${daemon.pid}/task/${daemon.pid}/children`, 'utf8')
    .split(' ')
    .filter(Boolean)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
      } catch (_error) {
        return false;
      }
    })
    .map(Number);
}

/** Programs a takeover test keeps running: a counter terminal, a process printing on stdout and stderr, and a process reading its stdin. */
export interface KeptPrograms {
  readonly stop: string;
  readonly codes: { readonly terminal: number; readonly printer: number };
  readonly terminal: { readonly id: string; readonly pid: number };
  readonly printer: { readonly id: string; readonly pid: number };
  readonly reader: { readonly id: string };
}

/** Starts the {@link KeptPrograms} on `daemon`: the counters print until a file in `directory` exists, then exit with `codes`. */
export async function keepPrograms(daemon: DaemonProcess, directory: string, codes: KeptPrograms['codes']): Promise<KeptPrograms> {
  const stop = join(directory, 'stop');
  return {
    stop,
    codes,
    terminal: await callDaemon(daemon, 'POST', '/v1/terminals', counter(stop, codes.terminal)),
    printer: await callDaemon(daemon, 'POST', '/v1/processes', processCounter(stop, codes.printer)),
    reader: await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['cat'], stdio: { stdin: 'pipe' } }),
  };
}

/**
 * Ends the kept programs and checks that nothing was lost: the same pids as
 * their creates answered, the reader's `input` read once, every stream whole
 * and in order, and the exact exit codes.
 */
export async function endKeptPrograms(daemon: DaemonProcess, kept: KeptPrograms, input: string): Promise<void> {
  const { terminal, printer, reader } = kept;
  expect((await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}`)).pid).toBe(terminal.pid);
  expect((await callDaemon(daemon, 'GET', `/v1/processes/${printer.id}`)).pid).toBe(printer.pid);
  await callDaemon(daemon, 'POST', `/v1/processes/${reader.id}/stdin/close`);
  expect((await callDaemon(daemon, 'GET', `/v1/processes/${reader.id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: 0, signal: null });
  expect((await processOutput(daemon, reader.id, 'stdout')).text).toBe(input);
  writeFileSync(kept.stop, '');
  expect((await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: kept.codes.terminal, signal: null });
  contiguous((await outputOf(daemon, terminal.id)).text);
  expect((await callDaemon(daemon, 'GET', `/v1/processes/${printer.id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: kept.codes.printer, signal: null });
  for (const stream of ['stdout', 'stderr'] as const) contiguous((await processOutput(daemon, printer.id, stream)).text);
}

/**
 * `rounds` takeovers in a row of the daemon on `stateDir` while a terminal and
 * a process print, a program reads its stdin (a line written each round), and
 * a persistent shell is in the middle of a command at each takeover (which
 * then ends with the round's number as its status). After each: no zombie,
 * and the daemon's descriptors and resident memory, printed; at the end,
 * every stream whole and in order, each line of input read once, and the
 * descriptors no more than after the first takeover (give or take two).
 */
export async function repeatTakeovers(daemon: DaemonProcess, stateDir: string, rounds: number): Promise<void> {
  const kept = await keepPrograms(daemon, stateDir, { terminal: 0, printer: 5 });
  const { reader } = kept;
  const shell = await callDaemon(daemon, 'POST', '/v1/shells', { dialect: 'bash', cwd: stateDir });
  const descriptors = (): number => readdirSync(`/proc/${daemon.pid}/fd`).length;
  const counts: number[] = [];
  const pauses: number[] = [];
  let expected = '';
  for (let round = 1; round <= rounds; round += 1) {
    const line = `line-${round}\n`;
    expect(await callDaemon(daemon, 'POST', `/v1/processes/${reader.id}/stdin`, { data: line, writer: 'w', seq: round })).toEqual({
      applied: true,
      seq: round,
    });
    expected += line;
    const go = join(stateDir, `go-${round}`);
    const pending = callDaemon(daemon, 'POST', `/v1/shells/${shell.id}/run`, {
      command: `echo started-${round}; while [ ! -e ${go} ]; do sleep 0.05; done; (exit ${round})`,
    }).catch(() => undefined);
    await waitFor('the command to run', async () => (await outputOf(daemon, shell.terminalId)).text.includes(`started-${round}\r\n`));
    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
    const status = await control(stateDir, { op: 'status' });
    expect(status[0]!.takeovers).toBe(round);
    pauses.push((status[0]!.lastTakeover as { pauseMs: number }).pauseMs);
    await pending;
    writeFileSync(go, '');
    const answer = await callDaemon(daemon, 'POST', `/v1/shells/${shell.id}/wait`, { timeoutMs: 20_000 });
    expect([answer.reason, answer.exitCode]).toEqual(['completed', round]);
    await waitFor("the previous image's helpers to be collected", () => zombies(daemon).length === 0);
    counts.push(descriptors());
    console.log(
      `takeover ${round}: ${counts.at(-1)} descriptors, ${daemon.rssKiB()} KiB resident, ${pauses.at(-1)} ms from the old image's last read to the new one listening`,
    );
  }
  const sorted = [...pauses].sort((a, b) => a - b);
  console.log(`${rounds} takeovers: pause median ${sorted[Math.floor((sorted.length - 1) / 2)]} ms, worst ${sorted.at(-1)} ms`);
  expect(counts.at(-1)).toBeLessThanOrEqual(counts[0]! + 2);
  await endKeptPrograms(daemon, kept, expected);
}
