/**
 * `execworld ps`, `kill` and `logs` against a daemon, the daemon and token a
 * command finds, the one-line errors and their exit status, and the help.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { cliEnv, runCli, startCli } from '../helpers/cli.ts';
import { waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
let env: NodeJS.ProcessEnv;

const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  env = cliEnv(daemon.url, ALICE);
});
afterEach(async () => {
  // Each test starts with no session of the owner.
  for (const kind of ['terminals', 'processes'] as const) {
    for (const { id } of (await daemon.request('GET', `/v1/${kind}`)).body[kind]) await daemon.request('DELETE', `/v1/${kind}/${id}`);
  }
  for (const { id } of (await daemon.request('GET', '/v1/shells')).body.shells) await daemon.request('DELETE', `/v1/shells/${id}`);
});

const BASH = {
  argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
  cwd: '/tmp',
  env: { PS1: 'ew$ ', HISTFILE: '/dev/null' },
  rows: 24,
  cols: 80,
  graceMs: 1000,
};

async function createProcess(argv: string[]): Promise<{ id: string; pid: number }> {
  const { status, body } = await daemon.request('POST', '/v1/processes', {
    body: { argv, cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 },
  });
  expect(status).toBe(201);
  return body;
}

async function createTerminal(): Promise<{ id: string; pid: number }> {
  const { status, body } = await daemon.request('POST', '/v1/terminals', { body: BASH });
  expect(status).toBe(201);
  return body;
}

async function processEnded(id: string): Promise<void> {
  await waitFor(`${id} to end`, async () => (await daemon.request('GET', `/v1/processes/${id}`)).body.status === 'exited');
}

/** A line of ps's table, its columns separated by runs of blanks; a RegExp cell is matched as it says. */
const row = (...cells: (string | RegExp)[]): RegExp =>
  new RegExp(`^${cells.map((cell) => (typeof cell === 'string' ? cell.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : cell.source)).join(' +')}$`);
/** ps's CPU and MEM cells: numbers where a cgroup counts the session, else -. */
const CPU = /(?:\d+\.\d\ds|-)/;
const MEM = /(?:\d+(?:\.\d)?[kMGT]?|-)/;
/** ps's LIMITS cell of a session created without limits: the default pids limit where the host enforces pids, else -. */
const DEFAULT_LIMITS = /(?:pids=4096|-)/;
const HEADER = row('ID', 'PID', 'STATUS', 'EXIT', 'CPU', 'MEM', 'LIMITS', 'PORTS', 'ARGV');

describe('execworld ps', () => {
  test('lists terminals and processes oldest first: id, pid, status, exit and argv', async () => {
    const terminal = await createTerminal();
    const failed = await createProcess(['sh', '-c', 'exit 4']);
    await processEnded(failed.id);
    const sleeper = await createProcess(['sleep', '300']);
    const result = await runCli(['ps'], { env });
    expect(result.code).toBe(0);
    expect(result.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(HEADER),
      expect.stringMatching(row(terminal.id, String(terminal.pid), 'running', '-', CPU, MEM, DEFAULT_LIMITS, '-', '/bin/bash --noprofile --norc -i')),
      expect.stringMatching(row(failed.id, String(failed.pid), 'exited', '4', CPU, MEM, DEFAULT_LIMITS, '-', "sh -c 'exit 4'")),
      expect.stringMatching(row(sleeper.id, String(sleeper.pid), 'running', '-', CPU, MEM, DEFAULT_LIMITS, '-', 'sleep 300')),
    ]);
  });

  test.runIf(process.platform === 'linux')('lists the TCP ports a process listens on', async () => {
    const script = "require('http').createServer().listen(0, '127.0.0.1', function () { console.log(this.address().port) })";
    const server = await createProcess([process.execPath, '-e', script]);
    let port = '';
    await waitFor('the server to print its port', async () => {
      const read = await daemon.request('GET', `/v1/processes/${server.id}/output/stdout?from=0`);
      port = Buffer.from(String(read.body.data ?? ''), 'base64')
        .toString('utf8')
        .trim();
      return /^\d+$/.test(port);
    });
    await waitFor('ps to list the port', async () => (await runCli(['ps'], { env })).stdout.includes(` ${port} `));
    const result = await runCli(['ps'], { env });
    const line = result.stdout.split('\n').find((each) => each.startsWith(`${server.id} `)) ?? '';
    expect(line.split(/ +/).slice(0, 4)).toEqual([server.id, String(server.pid), 'running', '-']);
    expect(line.split(/ +/)[7]).toBe(port);
  });

  test('shows the cpu time and peak memory of every session, running ones included, and the limits it runs under', async ({ startDaemon }) => {
    const limited = await startDaemon({ containment: 'cgroup' });
    const created = await limited.request('POST', '/v1/processes', {
      body: {
        argv: ['python3', '-c', 'import time\nx = b"x" * (40 << 20)\nsum(range(3 * 10 ** 7))\ntime.sleep(300)'],
        cwd: '/tmp',
        limits: { memoryBytes: 100 << 20, pids: 64, cpu: 0.5 },
      },
    });
    expect(created.status).toBe(201);
    // Running, its cpu so far is what its cgroup counted at the call.
    let cells: string[] = [];
    await waitFor(
      'the work to show in ps',
      async () => {
        const result = await runCli(['ps'], { env: cliEnv(limited.url, ALICE) });
        expect(result.code, result.stderr).toBe(0);
        const [header, line] = result.stdout.trimEnd().split('\n');
        expect(header).toMatch(HEADER);
        cells = line!.split(/ +/);
        return Number(cells[4]!.replace('s', '')) >= 0.1 && /M$/.test(cells[5]!) && Number(cells[5]!.replace('M', '')) >= 40;
      },
      30_000,
    );
    console.log('ps of a running limited process', JSON.stringify(cells));
    expect(cells.slice(0, 4)).toEqual([created.body.id, String(created.body.pid), 'running', '-']);
    expect(cells[6]).toBe('mem=100M,pids=64,cpus=0.5');
    await limited.request('DELETE', `/v1/processes/${created.body.id}`);
  });
});

describe('kept shells', () => {
  /** A shell kept by `execworld run --keep`, its command waiting at `read`. */
  async function waitingShell(): Promise<string> {
    const result = await runCli(['run', '--keep', 'printf "name? "; read answer; echo "hello $answer"'], { env });
    expect(result, result.stderr).toMatchObject({ code: 1, stdout: 'name? ' });
    return /shell (s_\S+)/.exec(result.stderr)![1]!;
  }

  const shellState = async (id: string): Promise<string> => (await daemon.request('GET', `/v1/shells/${id}`)).body.state;

  test("ps lists a shell as one row, with its state and its terminal's pid and argv", async () => {
    const idle = (await daemon.request('POST', '/v1/shells', { body: { cwd: '/tmp' } })).body as { id: string; terminalId: string };
    const pid = (await daemon.request('GET', `/v1/terminals/${idle.terminalId}`)).body.pid as number;
    const open = await waitingShell();
    const result = await runCli(['ps'], { env });
    expect(result.code).toBe(0);
    expect(result.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(HEADER),
      expect.stringMatching(row(idle.id, String(pid), 'idle', '-', CPU, MEM, DEFAULT_LIMITS, '-', '/bin/bash --noprofile --norc -i')),
      expect.stringMatching(row(open, /\d+/, 'open', '-', CPU, MEM, DEFAULT_LIMITS, '-', '/bin/bash --noprofile --norc -i')),
    ]);
  });

  test('send answers a command waiting for input and prints what it printed then, with its status', async () => {
    const id = await waitingShell();
    expect(await runCli(['send', id, 'world'], { env })).toMatchObject({ code: 0, stdout: 'hello world\n', stderr: '' });
    expect(await shellState(id)).toBe('idle');
    // Waiting again says so, and how to answer.
    const again = await runCli(['run', '--shell', id, 'read first; read second; echo "$first-$second"'], { env });
    expect(again.code).toBe(1);
    expect(await runCli(['send', id, 'one'], { env })).toMatchObject({ code: 1, stderr: expect.stringContaining(`execworld send ${id} <text>`) });
    expect(await runCli(['send', '-n', id, 'two'], { env })).toMatchObject({ code: 1 });
    expect(await runCli(['send', id, '-three'], { env })).toMatchObject({ code: 2 });
    expect(await runCli(['send', id, '--', '-three'], { env })).toMatchObject({ code: 0, stdout: 'one-two-three\n' });
  });

  test('send: Ctrl-C interrupts the command it follows, which prints what arrived and exits 130; the shell is kept', async () => {
    const waiting = await runCli(['run', '--keep', 'read answer; echo "got $answer"; sleep 100'], { env });
    expect(waiting.code, waiting.stderr).toBe(1);
    const id = /shell (s_\S+)/.exec(waiting.stderr)![1]!;
    const send = startCli(['send', id, 'yes'], { env });
    await waitFor('the answer to be printed', () => send.stdout().includes('got yes'), 30_000);
    send.child.kill('SIGINT');
    expect(await send.result).toMatchObject({ code: 130, stdout: 'got yes\n' });
    await waitFor('the shell to be ready', async () => (await shellState(id)) === 'idle');
    expect(await runCli(['run', '--shell', id, 'echo next'], { env })).toMatchObject({ code: 0, stdout: 'next\n' });
  });

  test('a busy shell names the CLI commands that answer, interrupt or end it; interrupt and kill do', async () => {
    const id = await waitingShell();
    const busy = await runCli(['run', '--shell', id, 'echo next'], { env });
    expect(busy).toMatchObject({
      code: 1,
      stderr: `execworld: SHELL_BUSY: shell ${id} still runs a command (it waits for input, went idle, or another call runs it): answer it with 'execworld send ${id} <text>', interrupt it with 'execworld interrupt ${id}', or end the shell with 'execworld kill ${id}'\n`,
    });
    expect(busy.stderr).not.toMatch(/send\(\)|interrupt\(\)|wait\(\)/);
    expect(await runCli(['interrupt', id], { env })).toMatchObject({ code: 130, stderr: '' });
    expect(await shellState(id)).toBe('idle');
    expect(await runCli(['interrupt', id], { env })).toMatchObject({ code: 1, stderr: `execworld: shell ${id} runs no command (it is idle)\n` });
    expect(await runCli(['run', '--shell', id, 'echo next'], { env })).toMatchObject({ code: 0, stdout: 'next\n' });
    expect(await runCli(['kill', id], { env })).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect((await daemon.request('GET', `/v1/shells/${id}`)).status).toBe(404);
  });

  test('interrupt reaches a command another run waits for, and that run prints how it ended', async () => {
    const id = await waitingShell();
    await runCli(['interrupt', id], { env });
    const run = startCli(['run', '--shell', id, 'echo begun; sleep 100'], { env });
    await waitFor('the run to print', () => run.stdout().includes('begun'), 30_000);
    expect(await shellState(id)).toBe('running');
    expect(await runCli(['interrupt', id], { env })).toMatchObject({ code: 0, stderr: '' });
    expect(await run.result).toMatchObject({ code: 130 });
  });
});

describe('execworld kill', () => {
  test('ends a process tree and returns once it is gone; the process stays listed with how it ended', async () => {
    const sleeper = await createProcess(['sh', '-c', 'sleep 300 & wait']);
    const result = await runCli(['kill', sleeper.id], { env });
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    const info = (await daemon.request('GET', `/v1/processes/${sleeper.id}`)).body;
    expect(info).toMatchObject({ status: 'exited', exit: { exitCode: null, signal: 'SIGTERM' }, treeExited: true });
  });

  test('ends a terminal and returns once nothing of it runs; --delete forgets it', async () => {
    const terminal = await createTerminal();
    expect((await runCli(['kill', terminal.id], { env })).code).toBe(0);
    expect((await daemon.request('GET', `/v1/terminals/${terminal.id}`)).body).toMatchObject({ status: 'exited', treeExited: true });
    const other = await createTerminal();
    expect((await runCli(['kill', '--delete', other.id], { env })).code).toBe(0);
    expect((await daemon.request('GET', `/v1/terminals/${other.id}`)).status).toBe(404);
  });
});

describe('execworld logs', () => {
  test("prints a process's stdout and stderr apart, from the start", async () => {
    const printer = await createProcess(['sh', '-c', 'echo out-1; echo err-1 >&2; echo out-2']);
    await processEnded(printer.id);
    const result = await runCli(['logs', printer.id], { env });
    expect(result).toMatchObject({ code: 0, stdout: 'out-1\nout-2\n', stderr: 'err-1\n' });
  });

  test("prints a terminal's output so far, and with -f follows it until the program exits", async () => {
    const terminal = await createTerminal();
    await daemon.request('POST', `/v1/terminals/${terminal.id}/input`, { body: { data: 'echo first-$((1+1))\r' } });
    await waitFor('the first echo', async () => {
      const output = (await daemon.request('GET', `/v1/terminals/${terminal.id}/output?from=0&waitMs=0`)).body;
      return Buffer.from(output.data, 'base64').toString().includes('first-2');
    });
    const now = await runCli(['logs', terminal.id], { env });
    expect(now.code).toBe(0);
    expect(now.stdout).toContain('first-2');

    const follow = startCli(['logs', '-f', terminal.id], { env });
    // It has printed what there was and waits for more.
    await waitFor('logs -f to print the first echo', () => follow.stdout().includes('first-2'), 30_000);
    await daemon.request('POST', `/v1/terminals/${terminal.id}/input`, { body: { data: 'echo then-$((2+3)); exit 6\r' } });
    const result = await follow.result;
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('then-5');
    expect(result.stdout.indexOf('then-5')).toBeGreaterThan(result.stdout.indexOf('first-2'));
  });
});

describe('errors', () => {
  test('say an unknown id in one line naming the code, with exit status 1', async () => {
    const attach = await runCli(['attach', 't_nosuchterminal'], { env });
    expect(attach).toMatchObject({ code: 1, stdout: '', stderr: 'execworld: NOT_FOUND: no terminal t_nosuchterminal\n' });
    for (const command of ['kill', 'logs']) {
      const result = await runCli([command, 'p_nosuchprocess'], { env });
      expect(result, command).toMatchObject({ code: 1, stderr: 'execworld: NOT_FOUND: no terminal, process or shell p_nosuchprocess\n' });
    }
  });

  test('say a refused token in one line; --token beats EXECWORLD_TOKEN, which beats the token file', async () => {
    const bad = await runCli(['ps', '--token', 'not-the-token-0123456789'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^execworld: UNAUTHORIZED: .+\n$/);
    const badEnv = { ...env, EXECWORLD_TOKEN: 'not-the-token-0123456789' };
    expect((await runCli(['ps'], { env: badEnv })).stderr).toMatch(/^execworld: UNAUTHORIZED: /);
    expect(await runCli(['ps', '--token', ALICE], { env: badEnv })).toMatchObject({ code: 0, stderr: '' });
  });

  test('say that there is no token, or no daemon at the URL, with exit status 1', async () => {
    const noToken = await runCli(['ps'], { env: { ...env, XDG_CONFIG_HOME: mkdtempSync(join(tmpdir(), 'execworld-empty-')) } });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toMatch(/^execworld: no token: pass --token or set EXECWORLD_TOKEN \(there is no .*execworld\/token.*\)\n$/);
    const nowhere = { ...env, EXECWORLD_URL: 'http://127.0.0.1:1' };
    const unreachable = await runCli(['ps'], { env: nowhere });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/^execworld: CONNECTION_FAILED: .*127\.0\.0\.1:1.*\n$/);
    // --url before the command, or among its options, beats EXECWORLD_URL.
    expect((await runCli(['--url', daemon.url, 'ps'], { env: nowhere })).code).toBe(0);
    expect((await runCli(['ps', `--url=${daemon.url}`], { env: nowhere })).code).toBe(0);
  });
});

describe('help', () => {
  const COMMANDS = ['serve', 'exec', 'shell', 'attach', 'ps', 'logs', 'kill', 'send', 'interrupt', 'token-file'];

  test('lists every command, and each command answers --help', async () => {
    const top = await runCli(['--help'], { env });
    expect(top.code).toBe(0);
    for (const command of COMMANDS) expect(top.stdout).toMatch(new RegExp(`^ {2}${command} +\\S`, 'm'));
    const helps = await Promise.all(COMMANDS.map((command) => runCli([command, '--help'], { env })));
    helps.forEach((help, index) => {
      expect(help, COMMANDS[index]).toMatchObject({ code: 0, stderr: '' });
      expect(help.stdout, COMMANDS[index]).toMatch(new RegExp(`^Usage: execworld ${COMMANDS[index]}\\b`));
    });
  });

  test('refuses a missing or extra argument with exit status 2', async () => {
    expect(await runCli(['attach'], { env })).toMatchObject({
      code: 2,
      stderr: "execworld: missing <terminal-id>\nRun 'execworld attach --help' for the usage.\n",
    });
    expect(await runCli(['ps', 'extra'], { env })).toMatchObject({
      code: 2,
      stderr: "execworld: unexpected argument extra\nRun 'execworld ps --help' for the usage.\n",
    });
  });
});
