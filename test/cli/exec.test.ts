/**
 * `execworld exec` without a terminal, as a person runs it against a daemon:
 * the program's exit status, its stdout and stderr apart, stdin passed on and
 * closed at its end, --env and --cwd, and a signal to the command ending the
 * program.
 */
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
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

/** The owner's processes the daemon still lists. */
async function processes(): Promise<{ id: string; status: string; argv: string[] }[]> {
  return (await daemon.request('GET', '/v1/processes')).body.processes;
}

describe('execworld exec', () => {
  test.each([
    ['exits 0', ['true'], 0],
    ['exits 3', ['sh', '-c', 'exit 3'], 3],
    ['is killed by SIGKILL', ['sh', '-c', 'kill -9 $$'], 128 + 9],
  ])('exits with the status of a program that %s', async (_what, argv, status) => {
    const result = await runCli(['exec', '--', ...argv], { env });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(status);
  });

  test("writes the program's stdout and stderr to its own, apart, and forgets the process once it ended", async () => {
    const result = await runCli(['exec', 'sh', '-c', 'echo to-out; echo to-err >&2; echo more-out'], { env });
    expect(result).toMatchObject({ code: 0, stdout: 'to-out\nmore-out\n', stderr: 'to-err\n' });
    expect(await processes()).toEqual([]);
  });

  test("passes its stdin on to the program's, and closes it at its end", async () => {
    const lines = Array.from({ length: 2000 }, (_unused, index) => `line ${index}`).join('\n') + '\n';
    const result = await runCli(['exec', '--', 'cat'], { env, stdin: lines });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(lines);
  });

  test('sets --env entries and runs in --cwd; options after the program are its own', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'execworld-exec-cwd-')));
    const result = await runCli(
      ['exec', '--env', 'GREETING=hello world', '-e', 'EMPTY=', '--cwd', dir, 'sh', '-c', 'echo "$GREETING|${EMPTY-unset}|$(pwd)"', '--env'],
      {
        env,
      },
    );
    expect(result).toMatchObject({ code: 0, stdout: `hello world||${dir}\n` });
  });

  test("runs in the world's directory by default, never this command's (the daemon's own here)", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'execworld-exec-here-')));
    const result = await runCli(['exec', '--', 'pwd'], { env, cwd: dir });
    expect(result.stdout).toBe(`${process.cwd()}\n`);
  });

  test('ends the program when it is interrupted, and exits with the status of how it ended', async () => {
    const cli = startCli(['exec', '--', 'sleep', '300'], { env, stdin: { open: true } });
    await waitFor('sleep to run on the daemon', async () => (await processes()).some((each) => each.status === 'running' && each.argv[0] === 'sleep'), 30_000);
    cli.child.kill('SIGINT');
    const result = await cli.result;
    // SIGTERM ended it, the first step of a terminate.
    expect(result.code).toBe(128 + 15);
    expect(await processes()).toEqual([]);
  });

  test('runs without a terminal, saying so, when --tty is asked for but stdin is not a terminal (as kubectl does)', async () => {
    const cli = startCli(['exec', '--tty', 'cat'], { env, stdin: 'abc\n' });
    // On a terminal cat would wait for a Ctrl-D that a pipe never sends.
    const deadline = setTimeout(() => cli.child.kill('SIGKILL'), 30_000);
    const result = await cli.result.finally(() => clearTimeout(deadline));
    expect(result).toMatchObject({
      code: 0,
      stdout: 'abc\n',
      stderr: 'execworld: Unable to use a TTY - input is not a terminal or the right kind of file\n',
    });
    expect(await processes()).toEqual([]);
  });

  test("takes docker's habits: -it, -w/--workdir, --env-file and -e", async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'execworld-exec-habits-')));
    const envFile = join(dir, 'vars.env');
    // EXECWORLD_TOKEN is the program's: the command itself still uses the token file's token.
    writeFileSync(
      envFile,
      '# a comment\nGREETING=hello world\n\n  INDENTED=kept "as is"\nFROM_HERE\nNOT_SET_HERE\nOVERRIDDEN=file\nEXECWORLD_TOKEN=not-the-token-0123456789\n',
    );
    const local: NodeJS.ProcessEnv = { ...env, FROM_HERE: 'local value' };
    delete local.NOT_SET_HERE;
    const script = 'echo "$GREETING|$INDENTED|$FROM_HERE|${NOT_SET_HERE-unset}|$OVERRIDDEN|$EXECWORLD_TOKEN|$(pwd)"; cat';
    const result = await runCli(['exec', '-it', '-w', dir, '--env-file', envFile, '-e', 'OVERRIDDEN=flag', 'sh', '-c', script], {
      env: local,
      stdin: 'piped\n',
    });
    // Its stdin is a pipe: -t is said to be of no use, -i passes the pipe on.
    expect(result.stderr).toBe('execworld: Unable to use a TTY - input is not a terminal or the right kind of file\n');
    expect(result.stdout).toBe(`hello world|kept "as is"|local value|unset|flag|not-the-token-0123456789|${dir}\npiped\n`);
    expect(result.code).toBe(0);
    expect((await runCli(['exec', `--workdir=${dir}`, 'pwd'], { env })).stdout).toBe(`${dir}\n`);
    expect(await runCli(['exec', '--env-file', join(dir, 'missing.env'), 'true'], { env })).toMatchObject({
      code: 1,
      stderr: `execworld: cannot read --env-file ${join(dir, 'missing.env')} (ENOENT)\n`,
    });
    expect((await runCli(['exec', '--cwd', dir, '-w', dir, 'true'], { env })).code).toBe(2);
  });

  test('starts the program with -d, prints its id and returns while it runs on; its output is kept for logs', async () => {
    const result = await runCli(['exec', '-d', 'sh', '-c', 'echo started; exec sleep 300'], { env });
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const id = result.stdout.trim();
    expect(id).toMatch(/^p_\S+$/);
    expect((await daemon.request('GET', `/v1/processes/${id}`)).body.status).toBe('running');
    await waitFor('the output to be kept', async () => (await runCli(['logs', id], { env })).stdout === 'started\n', 30_000);
    expect((await runCli(['kill', '--delete', id], { env })).code).toBe(0);
    const terminal = await runCli(['exec', '-dt', 'sleep', '300'], { env });
    expect(terminal.stdout).toMatch(/^t_\S+\n$/);
    const terminalId = terminal.stdout.trim();
    expect((await daemon.request('GET', `/v1/terminals/${terminalId}`)).body.status).toBe('running');
    await daemon.request('DELETE', `/v1/terminals/${terminalId}`);
    // shell -d: a login bash on a terminal, for attach.
    const shell = await runCli(['shell', '-d', '-w', '/', '-e', 'MARK=detached'], { env });
    expect(shell).toMatchObject({ code: 0, stdout: expect.stringMatching(/^t_\S+\n$/), stderr: '' });
    const shellId = shell.stdout.trim();
    expect((await daemon.request('GET', `/v1/terminals/${shellId}`)).body).toMatchObject({ status: 'running', argv: ['bash', '-l'], cwd: '/' });
    await daemon.request('DELETE', `/v1/terminals/${shellId}`);
  });

  test('says in one line why the program did not start, with exit status 1', async () => {
    const missing = await runCli(['exec', '--', 'no-such-program-here'], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^execworld: EXECUTABLE_NOT_FOUND: .*no-such-program-here.*\n$/);
    const nowhere = await runCli(['exec', '--cwd', '/no/such/dir', '--', 'true'], { env });
    expect(nowhere.code).toBe(1);
    expect(nowhere.stderr).toMatch(/^execworld: CWD_NOT_FOUND: .*\/no\/such\/dir.*\n$/);
  });

  test('refuses a command line without a program, or with a bad option or --env, with exit status 2', async () => {
    for (const [args, message] of [
      [['exec'], 'missing the program to run'],
      [['exec', '--tty'], 'missing the program to run'],
      [['exec', '--bogus', 'true'], 'unknown option --bogus'],
      [['exec', '--env', 'NOEQUALS', 'true'], '--env takes NAME=VALUE, got "NOEQUALS"'],
      [['exec', '--cwd'], 'option --cwd needs a value'],
    ] as const) {
      const result = await runCli(args, { env });
      expect(result, args.join(' ')).toMatchObject({ code: 2, stderr: `execworld: ${message}\nRun 'execworld exec --help' for the usage.\n` });
    }
  });
});
