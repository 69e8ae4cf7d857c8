import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { SubprocessSpawnSpec, SubprocessStdio } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { waitFor } from '../helpers/wait.ts';

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
const stdoutOf = (handle: { collected: { stdout?: { readFrom(n: number): { text: string } } } }): string => handle.collected.stdout!.readFrom(0).text;

describe('spawn: synchronous validation', () => {
  it('names the bad field of malformed stdio and env', () => {
    expect(() => runtime.spawn(sh('true', { stdio: { stdin: 'bogus', stdout: 'pipe', stderr: 'pipe' } as unknown as SubprocessStdio }))).toThrow(
      /stdio\.stdin/,
    );
    expect(() => runtime.spawn(sh('true', { stdio: { stdin: 'ignore', stdout: { maxBytes: -4 }, stderr: 'pipe' } }))).toThrow(/stdio\.stdout/);
    expect(() => runtime.spawn(sh('true', { env: { 'A=B': 'x' } }))).toThrow(/env name/);
    expect(() => runtime.spawn(sh('true', { env: { A: 'x\0y' } }))).toThrow(/NUL/);
  });
});

describe('spawn: termination', () => {
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

  it('sees a group left with only zombies as gone (no containment: the tree is the group)', async () => {
    // A member forks a child, moves itself to another group and never reaps:
    // the child stays a zombie of the original group after the leader exits.
    // Contained, the member that moved is still the session's, and the tree runs on.
    const uncontained = new LocalRuntime({ containment: 'none' });
    // The leader takes the pids through a pipe the member closes only once it
    // has moved, so the leader never exits first, however slowly perl starts.
    const script = [
      'my $child = fork() // die "fork: $!";',
      'exit 0 if $child == 0;',
      'setpgrp(0, 0) or die "setpgrp: $!";',
      'print "$$ $child\\n";',
      'close STDOUT;',
      'sleep 30;',
    ].join('\n');
    const handle = uncontained.spawn({
      argv: ['/bin/sh', '-c', 'pids=$(perl -e "$0" &); echo "$pids"', script],
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
      // A deadline only to fail with a clear outcome instead of the test timeout: the wait must end by itself.
      await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
    } finally {
      process.kill(parent, 'SIGKILL');
      await uncontained.dispose();
    }
  });
});

describe('spawn: Windows rules (injected platform)', () => {
  it('without a job, ends the tree through taskkill /T /F and the top-level process through its own handle', async () => {
    const killed: [number, boolean][] = [];
    const windows = new LocalRuntime({ platform: 'win32', windows: { taskkill: (pid, force) => killed.push([pid, force]) } });
    const handle = windows.spawn(sh('sleep 30', { graceMs: 100 }));
    handle.terminate();
    expect(killed).toEqual([[handle.pid, true]]);
    // Every signal ends a Windows tree by force: the first tier is the end.
    await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGKILL' });
    await expect(handle.waitForExit()).resolves.toBe(true);
    expect(killed).toHaveLength(1);
    await windows.dispose();
  });

  it('merges the environment case-insensitively', async () => {
    const windows = new LocalRuntime({ platform: 'win32', ambientEnv: { PATH: process.env.PATH, Probe: 'ambient' }, windows: { taskkill: () => {} } });
    expect(windows.childEnvironment({ PROBE: 'explicit' })).toEqual({ PATH: process.env.PATH, PROBE: 'explicit' });
    await windows.dispose();
  });
});
