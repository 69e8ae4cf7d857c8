/**
 * The cgroup v2 side of session limits, on a directory that stands for a
 * delegated v2 cgroup: this host's v2 hierarchy has no controllers (they are
 * bound to its v1 hierarchies), so what cannot exist here is a directory of
 * plain files the kernel would have made. It checks which files a limited
 * session's cgroup gets and how its counters are read; the kernel's
 * enforcement of them is what test/provider/limits.test.ts proves on v1.
 * The per-run peak of a shell's run rests on `memory.peak`'s descriptor-local
 * reset (Linux 6.12), which a plain file cannot show: what is checked is that
 * a run opens the file, writes its reset, reads its peak through that same
 * descriptor, holds no more than one, and falls back to the session's peak
 * where the write is refused.
 *
 * An owner's group on v2 is a cgroup between the daemon's and its sessions'
 * (`<daemon's>/<group>/<session>`): it hands the controllers down and its
 * `pids.max` holds the group's total, raised for the instant of a spawn by
 * the daemon's own threads and put back. The kernel's enforcement of a
 * group's total is proven on v1 by test/server/owner-pids.test.ts.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CgroupControllers, finitePidsMaxUpFrom } from '../../service/src/provider/containment/cgroup-limits.ts';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A daemon's cgroup of session cgroups whose parent hands down `controllers`, and one session's cgroup in it. */
function v2Cgroup(controllers: string): { daemon: string; session: string } {
  const daemon = mkdtempSync(join(tmpdir(), 'execworld-v2-'));
  made.push(daemon);
  writeFileSync(join(daemon, 'cgroup.controllers'), `${controllers}\n`);
  writeFileSync(join(daemon, 'cgroup.subtree_control'), '');
  const session = join(daemon, 's-1');
  mkdirSync(session);
  for (const file of ['memory.max', 'memory.swap.max', 'pids.max', 'cpu.max']) writeFileSync(join(session, file), 'max\n');
  return { daemon, session };
}

describe('limits on cgroup v2', () => {
  it('enables the delegated controllers and writes memory.max, memory.swap.max, pids.max and cpu.max', () => {
    const { daemon, session } = v2Cgroup('cpuset cpu io memory pids');
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    expect([...controllers.v2].sort()).toEqual(['cpu', 'memory', 'pids']);
    expect(controllers.support()).toEqual({ supported: ['memoryBytes', 'pids', 'cpu'], unsupported: [], groupPids: expect.any(Number) });
    controllers.cell('s-1', session, { memoryBytes: 100 << 20, pids: 64, cpu: 0.25 });
    expect(readFileSync(join(session, 'memory.max'), 'latin1')).toBe(String(100 << 20));
    expect(readFileSync(join(session, 'memory.swap.max'), 'latin1')).toBe('0');
    expect(readFileSync(join(session, 'pids.max'), 'latin1')).toBe('64');
    expect(readFileSync(join(session, 'cpu.max'), 'latin1')).toBe('25000 100000');
    controllers.close();
  });

  it('reads usage from cpu.stat, memory.peak and the events files', () => {
    const { daemon, session } = v2Cgroup('memory pids cpu');
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    const cell = controllers.cell('s-1', session, { memoryBytes: 100 << 20, pids: 64 });
    writeFileSync(join(session, 'cpu.stat'), 'usage_usec 1500000\nuser_usec 1200000\nsystem_usec 300000\nnr_periods 0\nnr_throttled 0\n');
    writeFileSync(join(session, 'memory.peak'), `${90 << 20}\n`);
    writeFileSync(join(session, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n');
    writeFileSync(join(session, 'pids.events'), 'max 0\n');
    expect(cell.usage()).toEqual({ cpuUserMs: 1200, cpuSystemMs: 300, peakMemoryBytes: 90 << 20, limitHit: 'memory', oomKilled: true });
    writeFileSync(join(session, 'memory.events'), 'low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n');
    writeFileSync(join(session, 'pids.events'), 'max 7\n');
    expect(cell.usage()).toMatchObject({ limitHit: 'pids', oomKilled: false });
    controllers.close();
  });

  it('without delegated controllers (and no v1), says each limit is unsupported and refuses it naming the field', () => {
    const { daemon, session } = v2Cgroup('');
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    expect(controllers.support().supported).toEqual([]);
    expect(() => controllers.cell('s-1', session, { cpu: 1 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('limits.cpu') }),
    );
    controllers.close();
  });

  it("a run resets memory.peak through a descriptor of its own and reads the run's peak through it", () => {
    const { daemon, session } = v2Cgroup('memory pids cpu');
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    const cell = controllers.cell('s-1', session, undefined);
    const peakFile = join(session, 'memory.peak');
    writeFileSync(join(session, 'cpu.stat'), 'usage_usec 0\nuser_usec 0\nsystem_usec 0\n');
    writeFileSync(peakFile, `${90 << 20}\n`);
    const openFds = (): number => readdirSync('/proc/self/fd').length;
    const fds = openFds();
    const meter = cell.meter();
    // The reset went to the file, through the run's descriptor.
    expect(readFileSync(peakFile, 'latin1').startsWith('reset')).toBe(true);
    expect(openFds()).toBe(fds + 1);
    // What the kernel shows through that descriptor after the reset: the run's peak.
    writeFileSync(peakFile, `${4 << 20}\n`);
    expect(meter.usage()).toMatchObject({ peakMemoryBytes: 4 << 20, peakScope: 'run' });
    // Read through the descriptor, not the path: a file put in its place is not what the run reads.
    rmSync(peakFile);
    writeFileSync(peakFile, `${200 << 20}\n`);
    expect(meter.usage()).toMatchObject({ peakMemoryBytes: 4 << 20, peakScope: 'run' });
    expect(cell.usage().peakMemoryBytes).toBe(200 << 20);

    // One descriptor a cell: the next run's replaces the last one's; the end of a run closes its own.
    const runs = Array.from({ length: 5 }, () => cell.meter());
    expect(openFds()).toBe(fds + 1);
    writeFileSync(peakFile, `${8 << 20}\n`);
    runs.at(-1)!.close();
    expect(openFds()).toBe(fds);
    // Closed, a run keeps the peak it read last, at its end.
    writeFileSync(peakFile, `${16 << 20}\n`);
    expect(runs.at(-1)!.usage()).toMatchObject({ peakMemoryBytes: 8 << 20, peakScope: 'run' });
    // The removal of the cgroups closes the open run's.
    cell.meter();
    expect(openFds()).toBe(fds + 1);
    expect(cell.remove()).toBe(true);
    expect(openFds()).toBe(fds);
    controllers.close();
  });

  it("falls back to the session's peak where memory.peak cannot be reset (a kernel before 6.12) or is missing", () => {
    const { daemon, session } = v2Cgroup('memory pids cpu');
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    const cell = controllers.cell('s-1', session, undefined);
    const openFds = (): number => readdirSync('/proc/self/fd').length;
    const fds = openFds();
    // No memory.peak (before 5.19).
    expect(cell.meter().usage()).toMatchObject({ peakMemoryBytes: null, peakScope: 'session' });
    // A memory.peak that opens for writing but refuses the write: a kernel file that takes only a number
    // (this process's oom_score_adj answers EINVAL to \`reset\`), as a kernel that cannot reset the peak would.
    symlinkSync('/proc/self/oom_score_adj', join(session, 'memory.peak'));
    const before = readFileSync('/proc/self/oom_score_adj', 'latin1');
    expect(cell.meter().usage()).toMatchObject({ peakScope: 'session' });
    expect(readFileSync('/proc/self/oom_score_adj', 'latin1')).toBe(before);
    expect(openFds()).toBe(fds);
    controllers.close();
  });

  it("a group's cgroup hands the controllers down, holds the group's total, and is raised only for a spawn", () => {
    const { daemon } = v2Cgroup('memory pids cpu');
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    expect(controllers.groupsHeld).toBe(true);
    const group = join(daemon, 'o-1');
    mkdirSync(group);
    expect(controllers.group(group, { key: 'o-1', pids: 40 })).toBe(40);
    expect(readFileSync(join(group, 'cgroup.subtree_control'), 'latin1')).toBe('+memory +pids +cpu');
    expect(readFileSync(join(group, 'pids.max'), 'latin1')).toBe('40');
    const session = join(group, 's-1');
    mkdirSync(session);
    const cell = controllers.cell('s-1', session, { pids: 8 }, { key: 'o-1', total: 40 });
    expect(readFileSync(join(session, 'pids.max'), 'latin1')).toBe('8');
    expect(cell.groupPids).toBe(40);
    // During the spawn both limits have room for the daemon's own threads; after it, their own values.
    const during = cell.inside(() => [readFileSync(join(session, 'pids.max'), 'latin1'), readFileSync(join(group, 'pids.max'), 'latin1')].map(Number));
    expect(during[0]).toBeGreaterThan(8);
    expect(during[1]! - 40).toBe(during[0]! - 8);
    expect(readFileSync(join(session, 'pids.max'), 'latin1')).toBe('8');
    expect(readFileSync(join(group, 'pids.max'), 'latin1')).toBe('40');
    // Full once its pids.current reaches the total.
    writeFileSync(join(group, 'pids.current'), '39\n');
    expect(cell.groupFull()).toBe(false);
    writeFileSync(join(group, 'pids.current'), '40\n');
    expect(cell.groupFull()).toBe(true);
    controllers.close();
  });

  it("a group's default total is half the fewest pids the host and the cgroups above the daemon allow", () => {
    const root = mkdtempSync(join(tmpdir(), 'execworld-v2-tree-'));
    made.push(root);
    // <root>/<pod: pids.max 100>/<daemon's own: max>/<daemon's cgroup of session cgroups>
    const pod = join(root, 'pod');
    const own = join(pod, 'daemon');
    const daemon = join(own, 'execworld-1');
    mkdirSync(daemon, { recursive: true });
    writeFileSync(join(pod, 'pids.max'), '100\n');
    writeFileSync(join(own, 'pids.max'), 'max\n');
    writeFileSync(join(daemon, 'cgroup.controllers'), 'pids\n');
    writeFileSync(join(daemon, 'cgroup.subtree_control'), '');
    expect(finitePidsMaxUpFrom(own)).toEqual([100]);
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    expect(controllers.defaultGroupPids()).toBe(50);
    expect(controllers.support().groupPids).toBe(50);
    // A group that names no total gets the default.
    mkdirSync(join(daemon, 'o-2'));
    expect(controllers.group(join(daemon, 'o-2'), { key: 'o-2' })).toBe(50);
    expect(readFileSync(join(daemon, 'o-2', 'pids.max'), 'latin1')).toBe('50');
    controllers.close();
  });

  it('without a pids controller no group is held', () => {
    const { daemon } = v2Cgroup('memory cpu');
    const controllers = new CgroupControllers(daemon, 'unused', { hierarchies: [] });
    expect(controllers.groupsHeld).toBe(false);
    expect(controllers.support()).not.toHaveProperty('groupPids');
    controllers.close();
  });
});
