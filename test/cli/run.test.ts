/**
 * `execworld run` and `execworld screen` against a daemon, as a person uses them.
 */
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

describe('execworld run', () => {
  test('prints the output and exits with the status, ending its shell', async () => {
    const result = await runCli(['run', '--cwd', '/tmp', 'echo "in $PWD"; exit_with() { return $1; }; exit_with 3'], { env });
    expect(result).toMatchObject({ code: 3, stdout: 'in /tmp\n', stderr: '' });
    expect((await daemon.request('GET', '/v1/shells')).body.shells).toEqual([]);
  });

  test('keeps a shell with --keep and runs in it with --shell', async () => {
    const first = await runCli(['run', '--keep', '--env', 'GREETING=hello', 'cd / && export KEPT=yes'], { env, cwd: '/tmp' });
    expect(first.code).toBe(0);
    const id = /shell (s_\S+)/.exec(first.stderr)?.[1];
    expect(id, first.stderr).toBeDefined();
    const second = await runCli(['run', '--shell', id!, 'echo "$KEPT $GREETING $PWD"'], { env });
    expect(second).toMatchObject({ code: 0, stdout: 'yes hello /\n' });
    expect((await daemon.request('DELETE', `/v1/shells/${id}`)).status).toBe(200);
  });

  test('says when the command waits for input, and keeps the shell for it', async () => {
    const result = await runCli(['run', 'printf "name? "; read answer'], { env });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('name? ');
    expect(result.stderr).toMatch(
      /^execworld: WAITING_FOR_INPUT: the command waits for input \(bash\); shell (s_\S+) keeps it: answer it with 'execworld send \1 <text>', interrupt it with 'execworld interrupt \1', or end the shell with 'execworld kill \1'\n$/,
    );
    const id = /shell (s_\S+)/.exec(result.stderr)![1]!;
    expect((await daemon.request('POST', `/v1/shells/${id}/send`, { body: { input: 'x\r' } })).body).toMatchObject({ reason: 'completed', exitCode: 0 });
    await daemon.request('DELETE', `/v1/shells/${id}`);
  });

  test('--memory, --pids-limit and --cpus limit the new shell; --usage prints what the command used on stderr', async ({ startDaemon }) => {
    const limited = await startDaemon({ containment: 'cgroup' });
    const limitedEnv = cliEnv(limited.url, ALICE);
    const pidsMax = 'cat /sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)/pids.max';
    const result = await runCli(
      ['run', '--memory', '100m', '--pids-limit', '64', '--cpus', '0.5', '--usage', `${pidsMax}; head -c 50000000 /dev/zero | sha256sum >/dev/null`],
      {
        env: limitedEnv,
      },
    );
    console.log('run --usage stderr', JSON.stringify(result.stderr));
    expect(result).toMatchObject({ code: 0, stdout: '64\n' });
    expect(result.stderr).toMatch(
      /^execworld: usage cpu_user_ms=\d+ cpu_system_ms=\d+ peak_memory_bytes=\d+ peak_scope=(run|session) limit_hit=(-|cpu) oom_killed=false\n$/,
    );
    const hog = await runCli(['run', '-m', '64m', '--usage', `python3 -c "x = b'x' * (600 << 20)"`], { env: limitedEnv });
    expect(hog.code).toBe(137);
    expect(hog.stderr).toMatch(/ limit_hit=memory oom_killed=true\n$/);
  });

  test('bad limits are usage errors naming the flag', async () => {
    for (const [args, flag] of [
      [['--memory', 'lots'], '--memory'],
      [['--memory', '1k'], '--memory'],
      [['--pids-limit', '0'], '--pids-limit'],
      [['--pids-limit', '1.5'], '--pids-limit'],
      [['--cpus', 'half'], '--cpus'],
      [['--cpus', '5000'], '--cpus'],
      [['--shell', 's_x', '--cpus', '1'], '--cpus'],
    ] as const) {
      const result = await runCli(['run', ...args, 'true'], { env });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(flag);
      // Refused as a value, not as an option the command does not know.
      expect(result.stderr).not.toMatch(/unknown option/i);
    }
  });

  /** The owner's shells on the daemon. */
  const shells = async (): Promise<{ id: string; state: string }[]> => (await daemon.request('GET', '/v1/shells')).body.shells;

  test('prints the output as it comes; Ctrl-C interrupts the command, prints what arrived, exits 130 and ends the shell', async () => {
    const cli = startCli(['run', 'echo start; sleep 100; echo never'], { env });
    await waitFor('start to be printed', () => cli.stdout().includes('start'), 30_000);
    // Printed while the command still runs: the shell's run is under way.
    expect(await shells()).toEqual([expect.objectContaining({ state: 'running' })]);
    cli.child.kill('SIGINT');
    const result = await cli.result;
    expect(result.code, result.stderr).toBe(130);
    // What arrived, without the line end the shell adds to a line cut short.
    expect(result.stdout).toBe('start\n');
    expect(result.stderr).toBe('');
    expect(await shells()).toEqual([]);
  });

  test('keeps the shell at Ctrl-C with --keep, ready for the next command', async () => {
    const cli = startCli(['run', '--keep', 'echo start; sleep 100'], { env });
    await waitFor('start to be printed', () => cli.stdout().includes('start'), 30_000);
    cli.child.kill('SIGINT');
    const result = await cli.result;
    expect(result.code, result.stderr).toBe(130);
    const id = /shell (s_\S+)/.exec(result.stderr)![1]!;
    expect(await shells()).toEqual([expect.objectContaining({ id, state: 'idle' })]);
    expect(await runCli(['run', '--shell', id, 'echo again'], { env })).toMatchObject({ code: 0, stdout: 'again\n' });
    await daemon.request('DELETE', `/v1/shells/${id}`);
  });

  test('streams long output in order, past the size one answer holds, and says what the daemon dropped', async () => {
    // 2 MiB of numbered lines: an answer keeps 1 MiB (its head and tail), the stream all of it. On a machine too busy
    // for this reader the daemon's ring may move on before it reads: then stderr says how many bytes, and the lines
    // around the hole are still whole and in order.
    const result = await runCli(['run', 'seq 1 300000'], { env });
    expect(result.code).toBe(0);
    const dropped = [...result.stderr.matchAll(/^execworld: (\d+) bytes of the output were dropped before they could be shown/gm)].map((match) =>
      Number(match[1]),
    );
    expect(result.stderr.replace(/^execworld: \d+ bytes of the output were dropped.*\n/gm, '')).toBe('');
    const lines = result.stdout.split('\n');
    expect(lines.at(-1)).toBe('');
    expect(lines.at(-2)).toBe('300000');
    const numbers = lines.slice(0, -1).map(Number);
    // Consecutive but at the holes: a hole may cut a line, which breaks the run of numbers on both of its sides.
    const breaks = numbers.filter((value, index) => index > 0 && value !== numbers[index - 1]! + 1).length + (numbers[0] === 1 ? 0 : 1);
    expect(breaks).toBeLessThanOrEqual(2 * dropped.length);
    // A hole may also join the start of one line to the end of another: at most one line per hole is none of seq's.
    const strays = numbers.filter((value) => !(Number.isInteger(value) && value >= 1 && value <= 300000));
    expect(strays.length).toBeLessThanOrEqual(dropped.length);
    if (dropped.length === 0) expect(numbers).toHaveLength(300000);
    console.log(
      `seq 1 300000 through run: ${numbers.length} lines shown, ${dropped.reduce((sum, bytes) => sum + bytes, 0)} bytes dropped in ${dropped.length} holes`,
    );
  });

  test('interrupts at --timeout and exits 130', async () => {
    const result = await runCli(['run', '--timeout', '300', 'echo begun; sleep 30'], { env });
    expect(result).toMatchObject({ code: 130, stdout: 'begun\n' });
    expect(result.stderr).toContain('TIMEOUT');
  });

  test('refuses bad usage with status 2 and an unknown shell with 1', async () => {
    expect((await runCli(['run'], { env })).code).toBe(2);
    expect((await runCli(['run', '--timeout', 'soon', 'true'], { env })).code).toBe(2);
    expect((await runCli(['run', '--shell', 's_x', '--pwsh', 'true'], { env })).code).toBe(2);
    const unknown = await runCli(['run', '--shell', 's_unknown', 'true'], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^execworld: NOT_FOUND: /);
  });
});

describe('execworld screen', () => {
  test('prints what the terminal shows', async () => {
    const created = await daemon.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/sh', '-c', 'printf "top line\\n  indented\\n"; sleep 30'], cwd: '/tmp', rows: 10, cols: 40, graceMs: 500 },
    });
    const id = created.body.id as string;
    await waitFor('the output', async () => (await daemon.request('GET', `/v1/terminals/${id}`)).body.output.end >= 20);
    const result = await runCli(['screen', id], { env });
    expect(result).toMatchObject({ code: 0, stdout: 'top line\n  indented\n' });
    const json = JSON.parse((await runCli(['screen', '--json', id], { env })).stdout) as { cursor: { row: number } };
    expect(json.cursor.row).toBe(2);
    await daemon.request('DELETE', `/v1/terminals/${id}`);
  });
});
