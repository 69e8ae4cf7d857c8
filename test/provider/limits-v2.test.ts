/**
 * The cgroup v2 side of session limits, on a directory that stands for a
 * delegated v2 cgroup: this host's v2 hierarchy has no controllers (they are
 * bound to its v1 hierarchies), so what cannot exist here is a directory of
 * plain files the kernel would have made. It checks which files a limited
 * session's cgroup gets and how its counters are read; the kernel's
 * enforcement of them is what test/provider/limits.test.ts proves on v1.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CgroupControllers } from '../../service/src/provider/containment/cgroup-limits.ts';

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
    expect(controllers.support()).toEqual({ supported: ['memoryBytes', 'pids', 'cpu'], unsupported: [] });
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
});
