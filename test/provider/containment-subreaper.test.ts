/**
 * The fallback containment where no cgroup can be made: this test process is
 * made a child subreaper (forced, though a cgroup could be made here), and
 * sessions track what they start by identity. Real processes throughout.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { SubprocessSpawnSpec } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { selectContainment } from '../../service/src/provider/platform/index.ts';
import { markerPids, sleepMarkers } from '../helpers/proc.ts';
import { openBash } from '../helpers/terminal.ts';
import { waitFor } from '../helpers/wait.ts';

// This test file starts children only through the runtime, as the daemon does: orphans are sessions'.
const runtime = new LocalRuntime({ containment: selectContainment('subreaper', { claimOrphans: true }).containment });
afterAll(() => runtime.dispose());

const markers = sleepMarkers(afterEach);
const marker = (): string => markers.next();

const sh = (script: string): SubprocessSpawnSpec => ({
  argv: ['/bin/sh', '-c', script],
  cwd: '/tmp',
  stdio: { stdin: 'ignore', stdout: { maxBytes: 4096 }, stderr: { maxBytes: 4096 } },
  graceMs: 500,
});

/** This process's children, as (pid, state, command) rows. */
function children(): { pid: number; state: string; comm: string }[] {
  const rows: { pid: number; state: string; comm: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === process.pid)
        rows.push({ pid: Number(entry), state: fields[0]!, comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
    } catch (_error) {
      // Gone while reading.
    }
  }
  return rows;
}

describe('subreaper containment', () => {
  it('is the mode the runtime reports', () => {
    expect(runtime.containmentMode).toBe('subreaper');
  });

  it('adopts a process that detached with setsid -f, keeps the tree alive while it runs, and terminate ends it', async () => {
    const m = marker();
    const handle = runtime.spawn(sh(`setsid -f sleep ${m}`));
    await handle.done;
    await waitFor('the escapee', () => markerPids(m).length === 1);
    const [escapee] = markerPids(m);
    // Reparented to this process, not to init, once setsid's own process has exited.
    await waitFor('the escapee to be reparented here', () => children().some((child) => child.pid === escapee));
    await expect(handle.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
    handle.terminate();
    await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
    expect(markerPids(m)).toEqual([]);
    // Its exit was collected here: no zombie of it is left.
    await waitFor('the zombie to be reaped', () => !children().some((child) => child.pid === escapee), 10_000);
  });

  it('gives an orphan to the session whose pipes it holds while another runs, and ends it with that one only', async () => {
    const m = marker();
    const other = runtime.spawn(sh(`sleep ${marker()}`));
    // The session's pipes are read from its top-level process once it runs; this one waits on its
    // stdin until the escapee exists, so it cannot exit before they were read. (One that exits at
    // once may not be read in time: a documented limit of the subreaper mode.)
    const owner = runtime.spawn({ ...sh(`setsid -f sleep ${m}; read go`), stdio: { stdin: 'pipe', stdout: { maxBytes: 4096 }, stderr: { maxBytes: 4096 } } });
    await waitFor('the escapee', () => markerPids(m).length === 1);
    owner.stdin!.end('go\n');
    await owner.done;
    const [escapee] = markerPids(m);
    // An orphan once setsid's own process has exited: from then on it is claimed by the pipes it holds.
    await waitFor('the escapee to be reparented here', () => children().some((child) => child.pid === escapee));
    await expect(owner.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
    other.terminate();
    await expect(other.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
    expect(markerPids(m)).toHaveLength(1);
    owner.terminate();
    await expect(owner.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
    expect(markerPids(m)).toEqual([]);
  });

  it('a terminal: terminate resolves only once a setsid -f escapee is gone', async () => {
    const m = marker();
    const shell = await openBash(runtime, { graceMs: 500 });
    await shell.run(`setsid -f sleep ${m}`);
    await waitFor('the escapee', () => markerPids(m).length === 1);
    await shell.terminal.terminate();
    expect(markerPids(m)).toEqual([]);
  });

  it('claims an orphan whose parent left the session and exited, and reaps it once it ends by itself', async () => {
    const m = marker();
    // The subshell leaves the group and the session, then exits at once; its child is reparented here.
    const handle = runtime.spawn(sh(`setsid sh -c 'sleep ${m} & echo $!' > /dev/null; sleep 0.2; exit 0`));
    await waitFor('the grandchild', () => markerPids(m).length === 1);
    const [grandchild] = markerPids(m);
    await handle.done;
    await expect(handle.waitForExit(AbortSignal.timeout(300))).resolves.toBe(false);
    process.kill(grandchild!, 'SIGTERM');
    await expect(handle.waitForExit(AbortSignal.timeout(20_000))).resolves.toBe(true);
    await waitFor('the zombie to be reaped', () => !children().some((child) => child.pid === grandchild), 10_000);
  });
});
