/**
 * `execworld exec` and `execworld shell` take `run`'s limit flags
 * (-m/--memory, --pids-limit, --cpus), and `exec --usage` prints what the
 * program used as `run --usage` does, against a daemon that holds its
 * sessions in cgroups (this host's v1 memory, pids and cpu controllers).
 */
import { describe, expect } from 'vitest';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { cliEnv, runCli } from '../helpers/cli.ts';

let daemon: TestDaemon;
let env: NodeJS.ProcessEnv;

const test = daemonTest({ containment: 'cgroup' });

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  env = cliEnv(daemon.url, ALICE);
});

/** Prints a v1 controller's file of the cgroup of the shell that reads it (this host is hybrid). */
const controlFile = (controller: string, file: string): string =>
  `cat /sys/fs/cgroup/${controller}$(grep :${controller}: /proc/self/cgroup | cut -d: -f3)/${file}`;

const USAGE_LINE = /^execworld: usage cpu_user_ms=(\d+) cpu_system_ms=(\d+) peak_memory_bytes=(\d+) peak_scope=session limit_hit=(-|cpu) oom_killed=false\n$/;

const BAD_LIMITS = [
  [['--memory', 'lots'], '--memory'],
  [['-m', '1k'], '--memory'],
  [['--pids-limit', '0'], '--pids-limit'],
  [['--cpus', 'half'], '--cpus'],
  [['--cpus', '5000'], '--cpus'],
] as const;

describe('execworld exec', () => {
  test('-m, --pids-limit and --cpus limit its session; --usage prints what the program used on stderr', async () => {
    const script = `${controlFile('pids', 'pids.max')}; ${controlFile('memory', 'memory.limit_in_bytes')}; head -c 50000000 /dev/zero | sha256sum >/dev/null`;
    const result = await runCli(['exec', '-m', '100m', '--pids-limit', '48', '--cpus', '0.5', '--usage', '--', 'sh', '-c', script], { env });
    console.log('exec --usage stderr', JSON.stringify(result.stderr));
    expect(result).toMatchObject({ code: 0, stdout: `48\n${100 << 20}\n` });
    const [, user, system] = USAGE_LINE.exec(result.stderr) ?? [];
    expect(result.stderr).toMatch(USAGE_LINE);
    // Hashing 50 MB takes some cpu of its own.
    expect(Number(user) + Number(system)).toBeGreaterThan(10);
  });

  test('--usage says an out-of-memory kill, and the status is SIGKILL', async () => {
    const hog = await runCli(['exec', '-m', '64m', '--usage', '--', 'python3', '-c', "x = b'x' * (600 << 20)"], { env });
    expect(hog.code).toBe(128 + 9);
    expect(hog.stderr).toMatch(/ limit_hit=memory oom_killed=true\n$/);
  });

  test('--detach: the process and the terminal it starts run under the limits', async () => {
    const processId = (await runCli(['exec', '-d', '--pids-limit', '33', '--cpus', '0.25', '--', 'sleep', '30'], { env })).stdout.trim();
    const terminalId = (await runCli(['exec', '-d', '-t', '-m', '80m', '--', 'sleep', '30'], { env })).stdout.trim();
    try {
      expect((await daemon.request('GET', `/v1/processes/${processId}`)).body.limits).toEqual({ pids: 33, cpu: 0.25 });
      // The pids it did not ask for are the daemon's default, where the host holds sessions to one (DEFAULT_SESSION_PIDS).
      expect((await daemon.request('GET', `/v1/terminals/${terminalId}`)).body.limits).toEqual({ memoryBytes: 80 << 20, pids: 4096 });
    } finally {
      await daemon.request('POST', `/v1/processes/${processId}/terminate`);
      await daemon.request('POST', `/v1/terminals/${terminalId}/terminate`);
    }
  });

  test('bad limits, and --usage with --detach, are usage errors naming the flag', async () => {
    for (const [args, flag] of [...BAD_LIMITS, [['--usage', '--detach'], '--usage']] as const) {
      const result = await runCli(['exec', ...args, '--', 'true'], { env });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(flag);
      expect(result.stderr).not.toMatch(/unknown option/i);
    }
  });
});

describe('execworld shell', () => {
  test('-m, --pids-limit and --cpus limit the new shell', async () => {
    const id = (await runCli(['shell', '--detach', '-m', '96m', '--pids-limit', '20', '--cpus', '1.5'], { env })).stdout.trim();
    try {
      expect((await daemon.request('GET', `/v1/terminals/${id}`)).body).toMatchObject({
        argv: ['bash', '-l'],
        limits: { memoryBytes: 96 << 20, pids: 20, cpu: 1.5 },
      });
    } finally {
      await daemon.request('POST', `/v1/terminals/${id}/terminate`);
    }
  });

  test('bad limits are usage errors naming the flag', async () => {
    for (const [args, flag] of BAD_LIMITS) {
      const result = await runCli(['shell', '--detach', ...args], { env });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(flag);
      expect(result.stderr).not.toMatch(/unknown option/i);
    }
  });
});
