/**
 * The remote runtime under faults: connections cut at random points while
 * tens of megabytes stream out, a stalled daemon, a killed child, and memory
 * while a consumer is paused. The daemon is the real CLI in a child process,
 * reached through a TCP proxy that cuts or stalls connections.
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect } from 'vitest';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { cutRandomly, FaultProxy } from '../helpers/proxy.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

const test = daemonProcessTest(['--ring-bytes', String(4 * 1024 * 1024)]);
let daemon: DaemonProcess;
let proxy: FaultProxy;
test.beforeAll(async ({ daemonProcess }) => {
  daemon = daemonProcess;
  proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
});
afterAll(async () => {
  await proxy.close();
});

const fast = { reconnectInitialDelayMs: 5, reconnectMaxDelayMs: 50, heartbeatMs: 500 };
const sha = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');
const rssKiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);

describe('the remote runtime under faults', () => {
  test('delivers a 50 MB piped stream byte-exact through random cuts, every time', async () => {
    const script = 'seq 1 6400000';
    const expected = sha(execFileSync('/bin/sh', ['-c', script], { maxBuffer: 128 * 1024 * 1024 }));
    const runtime = await connect(proxy.url, { token: daemon.token, ...fast });
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const handle = runtime.spawn({ argv: ['/bin/sh', '-c', script], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 });
      const hash = createHash('sha256');
      let bytes = 0;
      const ended = new Promise<void>((resolve, reject) => {
        handle.stdout!.on('data', (chunk: Buffer) => {
          hash.update(chunk);
          bytes += chunk.length;
        });
        handle.stdout!.on('end', resolve);
        handle.stdout!.on('error', reject);
      });
      const cuts = { count: 0 };
      await Promise.all([cutRandomly(proxy, ended, cuts), ended]);
      await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
      expect(cuts.count).toBeGreaterThan(0);
      expect(bytes).toBeGreaterThan(50_000_000);
      expect(hash.digest('hex')).toBe(expected);
    }
    await runtime.dispose();
  }, 120_000); // Three 50 MB streams: 8-13 s here, more while other suites load the machine.

  test('delivers terminal output byte-exact through random cuts, and input sent across cuts applies once', async () => {
    const runtime = await connect(proxy.url, { token: daemon.token, ...fast });
    const terminal = await runtime.spawnTerminal({
      argv: ['/bin/sh', '-c', 'stty -echo; echo READY; read a; read b; echo "$a+$b"; seq 1 400000'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 1000,
    });
    const chunks: Buffer[] = [];
    terminal.output.on('data', (chunk: Buffer) => chunks.push(chunk));
    await waitFor('echo off', () => Buffer.concat(chunks).toString().includes('READY'));
    await terminal.write('one\r');
    proxy.cut();
    await terminal.write('two\r');
    const cuts = { count: 1 };
    await Promise.all([cutRandomly(proxy, terminal.done, cuts), terminal.done]);
    const text = Buffer.concat(chunks).toString();
    const expected = `READY\r\none+two\r\n${execFileSync('/bin/sh', ['-c', 'seq 1 400000'], { maxBuffer: 64 * 1024 * 1024 })
      .toString()
      .replaceAll('\n', '\r\n')}`;
    expect(sha(text)).toBe(sha(expected));
    await runtime.dispose();
  });

  test('detects a stalled daemon by heartbeats, and resumes once it answers again', async () => {
    const runtime = await connect(proxy.url, { token: daemon.token, ...fast, heartbeatMs: 100 });
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
    const output: Buffer[] = [];
    terminal.output.on('data', (chunk: Buffer) => output.push(chunk));
    await terminal.write('before\r');
    await waitFor('echo', () => Buffer.concat(output).toString().includes('before'));
    const before = proxy.connections;
    proxy.stall();
    // Two missed heartbeats and the SDK drops the stalled connection and tries anew.
    await waitFor('a new connection attempt', () => proxy.connections > before, 20_000);
    expect(runtime.connection.connected).toBe(false);
    proxy.resume();
    await waitFor('the connection back', () => runtime.connection.connected, 20_000);
    await terminal.write('after\r');
    await waitFor('echo after the stall', () => Buffer.concat(output).toString().includes('after'));
    expect(
      Buffer.concat(output)
        .toString()
        .match(/before/g),
    ).toHaveLength(2);
    await terminal.terminate();
    await runtime.dispose();
  });

  test("rejects a live terminal's done with CONNECTION_LOST once the daemon stays unreachable past the deadline", async () => {
    const runtime = await connect(proxy.url, { token: daemon.token, ...fast, heartbeatMs: 100, reconnectDeadlineMs: 600, connectTimeoutMs: 200 });
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
    const outputError = new Promise((resolve) => terminal.output.once('error', resolve));
    proxy.stall();
    try {
      await expect(outputError).resolves.toMatchObject({ code: 'CONNECTION_LOST' });
      await expect(terminal.done).rejects.toMatchObject({ code: 'CONNECTION_LOST' });
      await expect(terminal.write('x')).rejects.toMatchObject({ code: 'CONNECTION_LOST' });
    } finally {
      proxy.resume();
    }
    const admin = await connect(proxy.url, { token: daemon.token });
    // The terminal itself lives on in the daemon: a lost client only detaches.
    const attached = await admin.attachTerminal(terminal.id);
    expect((await attached.info()).status).toBe('running');
    await attached.terminate();
    admin.close();
    runtime.close();
  });

  test('closing the runtime detaches: live streams close without an error event, and the terminal lives on', async () => {
    const runtime = await connect(proxy.url, { token: daemon.token });
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
    const piped = runtime.spawn({ argv: ['/bin/sleep', '30'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 });
    await piped.started;
    // No 'error' listener of the caller's own: an error event here would be an uncaught exception.
    const closed = [terminal.output, piped.stdout!, piped.stderr!].map((stream) => new Promise<void>((resolve) => stream.once('close', () => resolve())));
    runtime.close();
    await Promise.all(closed);
    await expect(terminal.done).rejects.toMatchObject({ code: 'CLOSED' });
    const admin = await connect(proxy.url, { token: daemon.token });
    const attached = await admin.attachTerminal(terminal.id);
    expect((await attached.info()).status).toBe('running');
    await admin.dispose();
    const check = await connect(proxy.url, { token: daemon.token });
    expect((await check.listProcesses()).find((entry) => entry.id === piped.id)?.status).toBe('running');
    await check.call('process.terminate', { id: piped.id! });
    check.close();
  });

  test('reports a child killed with SIGKILL as exactly that', async () => {
    const runtime = await connect(proxy.url, { token: daemon.token });
    const handle = runtime.spawn({ argv: ['/bin/sleep', '30'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 });
    const { pid } = await handle.started;
    process.kill(pid, 'SIGKILL');
    await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGKILL' });
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/sleep', '30'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
    process.kill(terminal.pid, 'SIGKILL');
    await expect(terminal.done).resolves.toEqual({ exitCode: null, signal: 'SIGKILL' });
    await runtime.dispose();
  });

  test('keeps the SDK and the daemon bounded while a consumer is paused and 1 GiB waits to be produced', async () => {
    const runtime: RemoteRuntime = await connect(proxy.url, { token: daemon.token });
    const gib = 1024 * 1024 * 1024;
    const handle = runtime.spawn({
      argv: ['/bin/sh', '-c', `head -c ${gib} /dev/zero`],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
      graceMs: 1000,
    });
    await handle.started;
    handle.stdout!.pause();
    // Measured from when the daemon's 4 MiB ring has filled, however long the start took.
    await waitFor('the ring to fill', async () => ((await runtime.call('process.get', { id: handle.id! })).stdout?.end ?? 0) >= 4 * 1024 * 1024, 30_000);
    const sdkBefore = rssKiB();
    const daemonBefore = daemon.rssKiB();
    // A fixed pause is right here: it checks that memory does not grow meanwhile.
    await sleep(2000);
    const sdkGrowth = rssKiB() - sdkBefore;
    const daemonGrowth = daemon.rssKiB() - daemonBefore;
    const info = await runtime.call('process.get', { id: handle.id! });
    // Paused: the daemon holds its 4 MiB ring, the SDK its window and a stream buffer; the producer waits.
    expect(info.stdout!.end).toBeLessThan(16 * 1024 * 1024);
    expect(sdkGrowth).toBeLessThan(24 * 1024);
    expect(daemonGrowth).toBeLessThan(24 * 1024);
    let bytes = 0;
    handle.stdout!.on('data', (chunk: Buffer) => (bytes += chunk.length));
    handle.stdout!.resume();
    await handle.done;
    await waitFor('every byte', () => bytes === gib, 60_000);
    await runtime.dispose();
  }, 120_000);
});
