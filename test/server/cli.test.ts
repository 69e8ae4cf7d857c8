/**
 * The real `execworld serve` in a child process: generated token, a stalled
 * consumer that blocks the program instead of growing the daemon, and a
 * SIGTERM that ends every session before the daemon exits 0.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TestSocket } from '../helpers/daemon.ts';
import { BIN, DAEMON_NODE_FLAGS, daemonArgv } from '../helpers/daemon-process.ts';
import { pidAlive, sleep, waitFor } from '../helpers/wait.ts';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

interface Running {
  readonly child: ChildProcess;
  readonly url: string;
  readonly token: string;
  readonly logs: () => string;
  request(method: string, path: string, body?: unknown): Promise<any>;
  rssKiB(): number;
}

async function serve(args: string[], env: Record<string, string> = {}): Promise<Running> {
  const home = mkdtempSync(join(tmpdir(), 'execworld-cli-'));
  // Started as a program, the way `npm start` and an installed `execworld` start it: its first line picks node and its flags.
  const child = spawn(BIN, ['serve', '--port', '0', ...args], {
    env: { ...process.env, XDG_CONFIG_HOME: home, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let logs = '';
  child.stdout.on('data', (chunk: Buffer) => (logs += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (logs += chunk.toString()));
  await waitFor('the daemon to listen', () => /"address":"http:\/\/[^"]+"/.test(logs), 20_000);
  const url = /"address":"(http:\/\/[^"]+)"/.exec(logs)![1]!;
  const tokenFile = /"tokenFile":"([^"]+)"/.exec(logs)![1]!;
  const token = readFileSync(tokenFile, 'utf8').trim();
  return {
    child,
    url,
    token,
    logs: () => logs,
    async request(method, path, body) {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return response.json();
    },
    rssKiB() {
      return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]);
    },
  };
}

/** Runs the bin to its end: exit status and output. */
async function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), 'execworld-cli-'));
  const child = spawn(BIN, args, { env: { ...process.env, XDG_CONFIG_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, stdout, stderr };
}

describe('execworld serve', () => {
  it('generates a user-only token file, never logs the token, and answers --help', async () => {
    const daemon = await serve([]);
    const tokenFile = /"tokenFile":"([^"]+)"/.exec(daemon.logs())![1]!;
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(daemon.token.length).toBeGreaterThanOrEqual(32);
    await daemon.request('GET', '/v1/terminals');
    expect(daemon.logs()).not.toContain(daemon.token);
    const help = spawn(process.execPath, daemonArgv(['serve', '--help']), { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    help.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
    await new Promise((resolve) => help.once('exit', resolve));
    expect(text).toContain('--token-file');
    expect(text).toContain('EXECWORLD_PORT');
  });

  it("runs under node with the bin's V8 flags", async () => {
    const daemon = await serve([]);
    const argv = readFileSync(`/proc/${daemon.child.pid}/cmdline`, 'utf8').split('\0');
    expect(DAEMON_NODE_FLAGS).toContain('--single-threaded-gc');
    expect(argv[0]).toMatch(/(^|\/)node$/);
    expect(argv.slice(1, 1 + DAEMON_NODE_FLAGS.length)).toEqual(DAEMON_NODE_FLAGS);
    // The bin's line ends node's options with `--`.
    expect(argv.slice(1 + DAEMON_NODE_FLAGS.length, 3 + DAEMON_NODE_FLAGS.length)).toEqual(['--', BIN]);
  });

  it('refuses bad settings with a message naming them', async () => {
    const bad = spawn(process.execPath, daemonArgv(['serve', '--port', 'eighty']), { stdio: ['ignore', 'ignore', 'pipe'] });
    let text = '';
    bad.stderr.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const code = await new Promise((resolve) => bad.once('exit', resolve));
    expect(code).toBe(2);
    expect(text).toMatch(/--port/);
  });

  it('says a taken port is taken and exits 1, without a stack trace', async () => {
    const first = await serve([]);
    const port = new URL(first.url).port;
    const second = await run(['serve', '--port', port]);
    expect(second.code).toBe(1);
    expect(second.stderr).toBe(
      `execworld: port ${port} on 127.0.0.1 is already in use (EADDRINUSE): stop what listens there, or choose another port with --port\n`,
    );
    expect(second.stdout).not.toMatch(/\n\s+at /);
  });

  it('on --host 0.0.0.0 logs the addresses it is reachable at and warns that the network reaches it', async () => {
    const daemon = await serve(['--host', '0.0.0.0']);
    const port = new URL(daemon.url).port;
    // The warning follows the listening line, perhaps in a later read of the pipe.
    await waitFor('the warning', () => daemon.logs().includes('reachable from the network'));
    const lines = daemon
      .logs()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line));
    const listening = lines.find((line) => line.address !== undefined);
    expect(listening.addresses).toContain(`http://127.0.0.1:${port}`);
    expect(listening.addresses.every((address: string) => !address.includes('0.0.0.0'))).toBe(true);
    const warning = lines.find((line) => line.level === 40 && /reachable from the network/.test(line.msg));
    expect(warning.msg).toMatch(/reachable from the network/);
    expect(warning.msg).toMatch(/unencrypted/);
    expect(warning.addresses).toEqual(listening.addresses);
    // On loopback there is nothing to warn about.
    const local = await serve([]);
    expect(local.logs()).not.toMatch(/reachable from the network/);
  });

  it.each([
    [['serve', '--bogus'], 'unknown option --bogus', 'execworld serve --help'],
    [['serve', '--port'], 'option --port needs a value', 'execworld serve --help'],
    [['--bogus'], 'unknown option --bogus', 'execworld --help'],
    [['bogus'], 'unknown command bogus', 'execworld --help'],
  ])('answers %j with an error pointing to --help and exit status 2', async (args, message, help) => {
    const result = await run(args);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`execworld: ${message}\nRun '${help}' for the usage.\n`);
  });

  it('prints its version for --version and exits 0', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../service/package.json', import.meta.url), 'utf8')) as { version: string };
    const result = await run(['--version']);
    expect(result).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it('uses a given token file with owners', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'execworld-tokens-'));
    const file = join(dir, 'tokens');
    writeFileSync(file, '# owners\nalice alice-token-0123456789\nbob bob-token-01234567890\n', { mode: 0o600 });
    const daemon = await serve(['--token-file', file]);
    const response = await fetch(`${daemon.url}/v1/terminals`, { headers: { authorization: 'Bearer bob-token-01234567890' } });
    expect(response.status).toBe(200);
    expect(daemon.logs()).toContain('"owners":["alice","bob"]');
  });

  it('blocks a program whose consumer stalls, instead of growing', async () => {
    const daemon = await serve(['--ring-bytes', '1048576']);
    const terminal = await daemon.request('POST', '/v1/terminals', {
      argv: ['/bin/sh', '-c', 'head -c 300000000 /dev/zero | base64'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 1000,
    });
    const socket = await TestSocket.open(`${daemon.url.replace('http', 'ws')}/v1/connect`, { token: daemon.token });
    await socket.subscribe({ target: { kind: 'terminal', id: terminal.id, stream: 'output' }, from: 0, window: 64 * 1024 });
    // The ring takes bytes until it holds 1 MiB unread, then pauses the terminal.
    let first = 0;
    await waitFor(
      'the ring to fill',
      async () => (first = (await daemon.request('GET', `/v1/terminals/${terminal.id}`)).output.end as number) >= 1024 * 1024,
      20_000,
    );
    const before = daemon.rssKiB();
    // A fixed pause is right here: it checks that nothing more is written meanwhile.
    await sleep(2000);
    const second = (await daemon.request('GET', `/v1/terminals/${terminal.id}`)).output.end;
    const growthKiB = daemon.rssKiB() - before;
    // The ring holds 1 MiB of unread output; the program is blocked, not writing on.
    expect(second).toBe(first);
    expect(second).toBeLessThan(4 * 1024 * 1024);
    expect(growthKiB).toBeLessThan(16 * 1024);
    socket.close();
  });

  it('keeps serving and still exits on SIGTERM after the reader of its log went away', async () => {
    const daemon = await serve([]);
    // The log pipe's reader is gone: every log line now meets EPIPE.
    const closed = new Promise((resolve) => daemon.child.stdout!.once('close', resolve));
    daemon.child.stdout!.destroy();
    await closed;
    for (let call = 0; call < 3; call += 1) expect((await daemon.request('GET', '/v1/terminals')).terminals).toEqual([]);
    const exited = new Promise((resolve) => daemon.child.once('exit', resolve));
    daemon.child.kill('SIGTERM');
    await expect(Promise.race([exited, sleep(15_000).then(() => 'still running 15 s after SIGTERM')])).resolves.toBe(0);
  });

  it('ends every session on SIGTERM and exits 0, leaving no process behind', async () => {
    const daemon = await serve([]);
    const shell = await daemon.request('POST', '/v1/terminals', {
      argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
      cwd: '/tmp',
      env: { PS1: '$ ' },
      rows: 24,
      cols: 80,
      graceMs: 500,
    });
    await daemon.request('POST', `/v1/terminals/${shell.id}/input`, { data: 'sleep 300 & echo "job=$!"\r' });
    const tree = await daemon.request('POST', '/v1/processes', {
      argv: ['/bin/sh', '-c', 'sleep 300 & echo $!; wait'],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: { maxBytes: 1000 }, stderr: 'pipe' },
      graceMs: 500,
    });
    let job = 0;
    let grandchild = 0;
    await waitFor('both children', async () => {
      const output = await daemon.request('GET', `/v1/terminals/${shell.id}/output?from=0`);
      job = Number(/job=(\d+)/.exec(Buffer.from(output.data, 'base64').toString())?.[1] ?? 0);
      grandchild = Number((await daemon.request('GET', `/v1/processes/${tree.id}/collected/stdout?from=0`)).text.trim() || 0);
      return job > 0 && grandchild > 0;
    });
    const pids = [shell.pid as number, job, tree.pid as number, grandchild];
    expect(pids.every(pidAlive)).toBe(true);
    daemon.child.kill('SIGTERM');
    const code = await new Promise((resolve) => daemon.child.once('exit', resolve));
    expect(code).toBe(0);
    expect(pids.filter(pidAlive)).toEqual([]);
  });
});
