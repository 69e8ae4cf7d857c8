/**
 * The one harness bench/containment.ts and bench/limits.ts compare spawn
 * costs with (bench/lib/spawn-cost.ts): every mode's process and terminal
 * figures are measured on real spawns and printed, and both benches use it
 * rather than a copy of their own.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import { compareSpawnCost } from '../../bench/lib/spawn-cost.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the spawn-cost bench harness', () => {
  it('prints median and p90 of each figure of each mode, limits included, and disposes the runtimes', async () => {
    const lines: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
    const cgroup = new LocalRuntime({ containment: 'cgroup' });
    const none = new LocalRuntime({ containment: 'none' });
    await compareSpawnCost({ none: { runtime: none }, cgroup: { runtime: cgroup }, 'cgroup+limits': { runtime: cgroup, limits: { pids: 64 } } }, 2, 'a note');
    vi.restoreAllMocks();
    console.log(lines.join('\n'));
    expect(lines[0]).toBe('rounds: 2; milliseconds; a note');
    for (const mode of ['none', 'cgroup', 'cgroup+limits']) {
      for (const figure of ['process spawn call', 'process cycle', 'terminal spawn call', 'terminal cycle']) {
        const row = lines.find((line) => line.startsWith(`${figure}, ${mode} `));
        expect(row, `${figure}, ${mode}`).toBeDefined();
        const [medianMs, p90Ms] = row!.trim().split(/\s+/).slice(-2).map(Number);
        expect(medianMs).toBeGreaterThan(0);
        expect(p90Ms).toBeGreaterThanOrEqual(medianMs!);
      }
    }
    expect(lines).toHaveLength(2 + 3 * 4);
    // Disposed: a spawn on either is refused.
    for (const runtime of [none, cgroup]) {
      expect(() => runtime.spawn({ argv: ['/bin/true'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 })).toThrow();
    }
  });

  it('is the one both benches use', () => {
    for (const bench of ['bench/containment.ts', 'bench/limits.ts']) {
      const text = readFileSync(bench, 'utf8');
      expect(text, bench).toContain("import { compareSpawnCost } from './lib/spawn-cost.ts';");
      expect(text, bench).not.toMatch(/spawnTerminal|hrtime/);
    }
  });
});
