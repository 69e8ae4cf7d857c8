import { readFileSync, statSync } from 'node:fs';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { SubprocessSpawnSpec, SubprocessStdio } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { collect, pidAlive, sleep, waitFor } from '../helpers/wait.ts';

const runtime = new LocalRuntime();
afterAll(() => runtime.dispose());

const collectBoth: SubprocessStdio = { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } };
const sh = (script: string, extra: Partial<SubprocessSpawnSpec> = {}): SubprocessSpawnSpec => ({
  argv: ['/bin/sh', '-c', script],
  cwd: '/tmp',
  stdio: collectBoth,
  graceMs: 2000,
  ...extra,
});
const stdoutOf = (handle: { collected: { stdout?: { readFrom(n: number): { text: string } } } }): string =>
  handle.collected.stdout!.readFrom(0).text;

describe('spawn: synchronous validation', () => {
  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31])('rejects graceMs %s', (graceMs) => {
    expect(() => runtime.spawn(sh('true', { graceMs }))).toThrow(/graceMs must be a positive finite number no greater than/);
  });

  it('rejects an empty program', () => {
    expect(() => runtime.spawn(sh('', { argv: [] }))).toThrow(/expected a non-empty program name at argv\[0\]/);
    expect(() => runtime.spawn(sh('', { argv: [''] }))).toThrow(/expected a non-empty program name at argv\[0\]/);
  });

  it('rejects an already aborted signal with its reason', () => {
    expect(() => runtime.spawn(sh('true', { signal: AbortSignal.abort('too late') }))).toThrow('aborted before spawn: too late');
    const reasonless = { aborted: true, reason: undefined, addEventListener() {}, removeEventListener() {} } as unknown as AbortSignal;
    expect(() => runtime.spawn(sh('true', { signal: reasonless }))).toThrow('aborted before spawn: aborted');
  });

  it('names the bad field of malformed stdio and env', () => {
    expect(() => runtime.spawn(sh('true', { stdio: { stdin: 'bogus', stdout: 'pipe', stderr: 'pipe' } as unknown as SubprocessStdio }))).toThrow(/stdio\.stdin/);
    expect(() => runtime.spawn(sh('true', { stdio: { stdin: 'ignore', stdout: { maxBytes: -4 }, stderr: 'pipe' } }))).toThrow(/stdio\.stdout/);
    expect(() => runtime.spawn(sh('true', { env: { 'A=B': 'x' } }))).toThrow(/env name/);
    expect(() => runtime.spawn(sh('true', { env: { A: 'x\0y' } }))).toThrow(/NUL/);
  });
});

describe('spawn: outcomes', () => {
  it('never interprets argv through a shell', async () => {
    const handle = runtime.spawn({ argv: ['printf', '%s', '$HOME'], cwd: '/tmp', stdio: collectBoth, graceMs: 1000 });
    await handle.done;
    expect(stdoutOf(handle)).toBe('$HOME');
  });

  it('reports exit codes and raw signals', async () => {
    await expect(runtime.spawn(sh('exit 42')).done).resolves.toEqual({ exitCode: 42, signal: null });
    await expect(runtime.spawn(sh('kill -TERM $$')).done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
  });

  it('rejects done for a missing program and a missing cwd; the tree is gone at once', async () => {
    const missing = runtime.spawn(sh('', { argv: ['/definitely/missing/program'] }));
    await expect(missing.done).rejects.toMatchObject({ code: 'ENOENT' });
    expect(missing.pid).toBe(-1);
    const badCwd = runtime.spawn(sh('true', { cwd: '/definitely/missing/dir' }));
    await expect(badCwd.done).rejects.toThrow(/ENOENT/);
    await expect(badCwd.waitForExit()).resolves.toBe(true);
  });

  it('runs with the scrubbed environment plus explicit entries and tombstones', async () => {
    const ambient = { PATH: process.env.PATH ?? '/usr/bin:/bin', PROBE: 'v', DSH_STALE: 'old', MY_TOKEN: 'secret' };
    const scoped = new LocalRuntime({ ambientEnv: ambient });
    const handle = scoped.spawn(
      sh('echo "${PROBE:-absent} ${DSH_STALE:-absent} ${MY_TOKEN:-absent} $DSH_SHELL $DSH_SESSION_ID $EXPLICIT_OVERRIDE_PASSWORD"', {
        env: { PROBE: undefined, DSH_SHELL: '1', DSH_SESSION_ID: 's', EXPLICIT_OVERRIDE_PASSWORD: 'x' },
      }),
    );
    await handle.done;
    expect(stdoutOf(handle)).toBe('absent absent absent 1 s x\n');
    await scoped.dispose();
  });
});

describe('spawn: stdio', () => {
  it("gives 'ignore' stdin as a character device at EOF", async () => {
    const cat = runtime.spawn({ argv: ['cat'], cwd: '/tmp', stdio: collectBoth, graceMs: 1000 });
    await expect(cat.done).resolves.toEqual({ exitCode: 0, signal: null });
    expect(stdoutOf(cat)).toBe('');
    const probe = runtime.spawn(sh('test -c /dev/stdin && echo char'));
    await probe.done;
    expect(stdoutOf(probe)).toBe('char\n');
  });

  it('writes batch stdin and closes it; EPIPE from a child that does not read is swallowed', async () => {
    const batch = runtime.spawn(sh('cat', { stdio: { ...collectBoth, stdin: { data: 'batch\n' } } }));
    expect(batch.stdin).toBeUndefined();
    await batch.done;
    expect(stdoutOf(batch)).toBe('batch\n');
    const big = runtime.spawn(sh('exit 7', { stdio: { ...collectBoth, stdin: { data: 'x'.repeat(1 << 20) } } }));
    await expect(big.done).resolves.toEqual({ exitCode: 7, signal: null });
    const socket = runtime.spawn(sh('test -S /dev/stdin && echo socket', { stdio: { ...collectBoth, stdin: { data: '' } } }));
    await socket.done;
    expect(stdoutOf(socket)).toBe('socket\n');
  });

  it('hands pipe streams over raw and exposes readers exactly for collected streams', async () => {
    const handle = runtime.spawn({ argv: ['cat'], cwd: '/tmp', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: { maxBytes: 100 } }, graceMs: 1000 });
    expect(handle.stdout).toBeDefined();
    expect(handle.collected.stdout).toBeUndefined();
    expect(handle.collected.stderr).toBeDefined();
    const out = collect(handle.stdout!);
    handle.stdin!.end('x\n');
    await handle.done;
    expect(out.text()).toBe('x\n');
  });

  it('keeps a 500-byte tail of 200 lines, with the whole stream in a private spill file', async () => {
    const handle = runtime.spawn(
      sh('i=1; while [ $i -le 200 ]; do printf "line-%04d\\n" $i; i=$((i+1)); done', {
        stdio: { stdin: 'ignore', stdout: { maxBytes: 500, spill: { maxBytes: 1 << 20 } }, stderr: 'pipe' },
      }),
    );
    await handle.done;
    const read = handle.collected.stdout!.readFrom(0);
    expect(read.lossy).toBe(true);
    expect(read.text).toContain('line-0200');
    expect(read.text).not.toContain('line-0001');
    expect(Buffer.byteLength(read.text)).toBe(500);
    const spill = readFileSync(read.spillPath!, 'utf8');
    expect(spill).toContain('line-0001');
    expect(spill).toContain('line-0200');
    expect(spill.length).toBe(2000);
    expect(statSync(read.spillPath!).mode & 0o777).toBe(0o600);
  });

  it('settles at most graceMs after exit while a descendant holds the collected pipe', async () => {
    const started = Date.now();
    const handle = runtime.spawn(sh('sleep 30 & echo started', { graceMs: 300 }));
    await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(5000);
    expect(stdoutOf(handle)).toBe('started\n');
    await expect(handle.waitForExit(AbortSignal.timeout(100))).resolves.toBe(false);
    handle.terminate();
    await expect(handle.waitForExit()).resolves.toBe(true);
  });
});

describe('spawn: termination', () => {
  it('escalates to SIGKILL when SIGTERM is ignored', async () => {
    const handle = runtime.spawn(sh("trap '' TERM; echo ready; while :; do sleep 0.05; done", { graceMs: 200 }));
    await waitFor('ready', () => stdoutOf(handle).includes('ready'));
    handle.terminate();
    await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGKILL' });
  });

  it('ends the whole group, grandchildren included; a second terminate is the same ladder', async () => {
    const handle = runtime.spawn(sh('sleep 60 & echo $!; wait', { graceMs: 2000 }));
    await waitFor('grandchild pid', () => /\d+\n/.test(stdoutOf(handle)));
    const grandchild = Number(stdoutOf(handle).trim());
    expect(pidAlive(grandchild)).toBe(true);
    handle.terminate();
    handle.terminate();
    await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
    await expect(handle.waitForExit()).resolves.toBe(true);
    expect(pidAlive(grandchild)).toBe(false);
  });

  it('keeps a TERM-trapping helper owned after the leader exits, until terminate', async () => {
    const handle = runtime.spawn(
      sh("(trap '' TERM; while :; do sleep 0.05; done) > /dev/null 2>&1 & echo $!", { graceMs: 200 }),
    );
    await handle.done;
    const helper = Number(stdoutOf(handle).trim());
    expect(pidAlive(helper)).toBe(true);
    await expect(handle.waitForExit(AbortSignal.timeout(150))).resolves.toBe(false);
    handle.terminate();
    await expect(handle.waitForExit()).resolves.toBe(true);
    expect(pidAlive(helper)).toBe(false);
  });

  it('terminates on abort, and ignores an abort after settlement', async () => {
    const controller = new AbortController();
    const handle = runtime.spawn(sh('sleep 30', { signal: controller.signal }));
    await sleep(50);
    controller.abort('stop');
    await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
    const late = new AbortController();
    const done = runtime.spawn(sh('exit 3', { signal: late.signal }));
    await expect(done.done).resolves.toEqual({ exitCode: 3, signal: null });
    late.abort();
    await expect(done.waitForExit()).resolves.toBe(true);
  });

  it('sends no signal at all once the tree was observed gone', async () => {
    const handle = runtime.spawn(sh('exit 0'));
    await handle.done;
    await handle.waitForExit();
    const kill = vi.spyOn(process, 'kill');
    try {
      handle.terminate();
      expect(kill).not.toHaveBeenCalled();
    } finally {
      kill.mockRestore();
    }
  });

  it('sees a group left with only zombies as gone', async () => {
    // A member forks a child, moves itself to another group and never reaps:
    // the child stays a zombie of the original group after the leader exits.
    const script = [
      'import os, time',
      'child = os.fork()',
      'if child == 0: os._exit(0)',
      'os.setpgid(0, 0)',
      'print(os.getpid(), child, flush=True)',
      'time.sleep(30)',
    ].join('\n');
    const handle = runtime.spawn({
      argv: ['/bin/sh', '-c', 'python3 -c "$0" & sleep 0.3; exit 0', script],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: { maxBytes: 100 }, stderr: 'inherit' },
      graceMs: 100,
    });
    await waitFor('pids', () => /\d+ \d+/.test(stdoutOf(handle)));
    const [parent, zombie] = stdoutOf(handle).trim().split(' ').map(Number) as [number, number];
    try {
      await waitFor('zombie', () => readFileSync(`/proc/${zombie}/stat`, 'latin1').includes(') Z '));
      await handle.done;
      // kill(-pgid, 0) still succeeds: the group has a member, a zombie.
      expect(() => process.kill(-handle.pid, 0)).not.toThrow();
      await expect(handle.waitForExit(AbortSignal.timeout(5000))).resolves.toBe(true);
    } finally {
      process.kill(parent, 'SIGKILL');
    }
  });
});

describe('spawn: Windows rules (injected platform)', () => {
  it('ends the tree through taskkill, and an inert taskkill leaves the tree alive', async () => {
    const killed: number[] = [];
    const windows = new LocalRuntime({ platform: 'win32', taskkill: (pid) => killed.push(pid) });
    const handle = windows.spawn(sh('sleep 30', { graceMs: 100 }));
    handle.terminate();
    expect(killed).toEqual([handle.pid]);
    await expect(handle.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
    expect(killed).toEqual([handle.pid, handle.pid]);
    // Not detached on Windows: the child is no group leader.
    process.kill(handle.pid, 'SIGKILL');
    await handle.done;
    await windows.dispose();
  });

  it('merges the environment case-insensitively', async () => {
    const windows = new LocalRuntime({ platform: 'win32', ambientEnv: { PATH: process.env.PATH, Probe: 'ambient' }, taskkill: () => {} });
    expect(windows.childEnvironment({ PROBE: 'explicit' })).toEqual({ PATH: process.env.PATH, PROBE: 'explicit' });
    await windows.dispose();
  });
});
