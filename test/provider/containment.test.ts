/**
 * Containment with a cgroup per session: what a session starts never outlives
 * it, even when it leaves the process group and the POSIX session (setsid,
 * job control) and is reparented away from the tree.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { SubprocessSpawnSpec } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import type { ProcStat } from '../../service/src/provider/inspect/linux-proc.ts';
import { killMarked, markerPids, sleepMarkers } from '../helpers/proc.ts';
import { openBash } from '../helpers/terminal.ts';
import { waitFor } from '../helpers/wait.ts';

const runtime = new LocalRuntime();
afterAll(() => runtime.dispose());

const markers = sleepMarkers(afterEach);
const marker = (): string => markers.next();

const sh = (script: string, shell = '/bin/sh'): SubprocessSpawnSpec => ({
  argv: [shell, '-c', script],
  cwd: '/tmp',
  stdio: { stdin: 'ignore', stdout: { maxBytes: 4096 }, stderr: { maxBytes: 4096 } },
  graceMs: 1000,
});

describe('containment: managed processes', () => {
  for (const [name, spec] of [
    ['setsid -f', (m: string) => sh(`setsid -f sleep ${m}`)],
    ['a setsid in a background subshell', (m: string) => sh(`(setsid sleep ${m} &)`)],
    // dash turns job control off without a terminal; bash puts the job in a group of its own.
    ['a job in its own process group (set -m)', (m: string) => sh(`set -m; sleep ${m} & exit 0`, '/bin/bash')],
  ] as const) {
    it(`keeps the tree alive while ${name} runs, and terminate ends it`, async () => {
      const m = marker();
      const handle = runtime.spawn(spec(m));
      await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
      await waitFor('the escapee', () => markerPids(m).length === 1);
      // The escapee provably runs (300 s), so the tree cannot be reported gone.
      await expect(handle.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
      expect(handle.treeExited).toBe(false);
      handle.terminate();
      await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
      expect(handle.treeExited).toBe(true);
      expect(markerPids(m)).toEqual([]);
    });
  }

  it('waitForExit answers true once the escapee ends by itself, without a terminate', async () => {
    const m = marker();
    const handle = runtime.spawn(sh(`setsid -f sleep ${m}`));
    await handle.done;
    await waitFor('the escapee', () => markerPids(m).length === 1);
    await expect(handle.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
    killMarked(m);
    await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
  });
});

/** The host's inspector, counting its readings of the whole process table. */
class CountingInspector extends LinuxInspector {
  wholeTable = 0;
  override table(): ProcStat[] {
    this.wholeTable += 1;
    return super.table();
  }
}

describe('containment: a process tree in a cgroup', () => {
  it('is signalled and told gone from its cell alone, never the whole process table, and nothing of it is left', async () => {
    const inspector = new CountingInspector();
    const local = new LocalRuntime({ inspector });
    try {
      expect(local.containmentMode).toBe('cgroup');
      const [member, escapee] = [marker(), marker()];
      // The leader exits at once: its group lives on in one sleep, and another left the group and the session.
      const handle = local.spawn(sh(`sleep ${member} & setsid -f sleep ${escapee}; exit 0`));
      await handle.done;
      await waitFor('the group member and the escapee', () => markerPids(member).length === 1 && markerPids(escapee).length === 1);
      inspector.wholeTable = 0;
      handle.terminate();
      await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
      expect(markerPids(member)).toEqual([]);
      expect(markerPids(escapee)).toEqual([]);
      expect(inspector.wholeTable).toBe(0);
    } finally {
      await local.dispose();
    }
  });

  // A program running as the daemon's user (root: a root-acting owner's) may write its own pid into another cgroup.
  it.skipIf(process.getuid?.() !== 0)('ends a program that moved itself out of its cell, and terminate waits for it', async () => {
    expect(runtime.containmentMode).toBe('cgroup');
    const m = marker();
    // Into the cgroup the daemon's own cgroup is in (a leaf with a process, where a process may always be put).
    const leave =
      'cg=$(sed -n "s/^0:://p" /proc/self/cgroup); base=/sys/fs/cgroup; [ -d /sys/fs/cgroup/unified ] && base=/sys/fs/cgroup/unified; ' +
      `echo $$ > "$base$(dirname "$(dirname "$cg")")/cgroup.procs" && exec sleep ${m}`;
    const handle = runtime.spawn({ ...sh(leave), graceMs: 300 });
    await waitFor('the program out of its cell', () => {
      const [pid] = markerPids(m);
      // Its v2 cgroup, which the cell is (the v1 ones count, not contain).
      return pid !== undefined && !/^0::.*\/s-\d+$/m.test(readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
    });
    handle.terminate();
    await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
    expect(markerPids(m)).toEqual([]);
    // Ended by a signal (its process group's SIGTERM reaches it, or the SIGKILL to its pid after the grace).
    expect((await handle.done).signal).toMatch(/^SIG(TERM|KILL)$/);
  });
});

describe('containment: terminals', () => {
  for (const [name, line] of [
    ['setsid -f', (m: string) => `setsid -f sleep ${m}`],
    ['a job that ignores SIGHUP in its own group (set -m)', (m: string) => `set -m; (trap '' HUP TERM; exec sleep ${m}) & disown`],
  ] as const) {
    it(`terminate resolves only once ${name} is gone`, async () => {
      const m = marker();
      const shell = await openBash(runtime, { graceMs: 500 });
      await shell.run(line(m));
      await waitFor('the escapee', () => markerPids(m).length === 1);
      await shell.terminal.terminate();
      // No waiting: terminate itself answers only once nothing of the session runs.
      expect(markerPids(m)).toEqual([]);
    });
  }

  it('ends an escapee when the shell exits by itself', async () => {
    const m = marker();
    const shell = await openBash(runtime);
    await shell.run(`setsid -f sleep ${m}`);
    await waitFor('the escapee', () => markerPids(m).length === 1);
    await shell.terminal.write('exit\r');
    await shell.terminal.done;
    // The runtime sweeps the ended terminal's session on its own.
    await waitFor('the escapee to be ended', () => markerPids(m).length === 0, 20_000);
  });
});
