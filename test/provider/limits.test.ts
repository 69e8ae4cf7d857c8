/**
 * Session limits and usage on this host's cgroups (v2 for containment, v1
 * memory/pids/cpu/cpuacct on a hybrid host): a process or terminal limited
 * on create runs inside its limits from its first instruction, and its cell
 * reports what it used and which limit it ran into.
 *
 * The behaviour under each limit (a fork bomb, a memory hog, a busy loop)
 * and the usage they report are the limits contract's, run over this runtime
 * and the remote one alike (test/conformance/limits-contract.ts); here is
 * what only this host's containment shows.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { SubprocessSpawnSpec } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { CgroupContainment } from '../../service/src/provider/containment/cgroup.ts';
import { removeCgroup } from '../../service/src/provider/containment/cgroup-fs.ts';
import { waitFor } from '../helpers/wait.ts';

const runtime = new LocalRuntime({ containment: 'cgroup' });
afterAll(() => runtime.dispose());

const spec = (argv: string[]): SubprocessSpawnSpec => ({
  argv,
  cwd: '/tmp',
  stdio: { stdin: 'ignore', stdout: { maxBytes: 65_536 }, stderr: { maxBytes: 65_536 } },
  graceMs: 1000,
});

async function stdoutOf(handle: ReturnType<LocalRuntime['spawn']>): Promise<string> {
  await handle.done;
  return handle.collected.stdout?.readFrom(0).text ?? '';
}

describe('limits: this host enforces them', () => {
  it('says which limits it can enforce', () => {
    const support = runtime.limitSupport();
    console.log('limit support', JSON.stringify(support));
    expect([...support.supported].sort()).toEqual(['cpu', 'memoryBytes', 'pids']);
  });

  it('refuses bad limits naming the field', () => {
    for (const [limits, field] of [
      [{ pids: -1 }, 'limits.pids'],
      [{ pids: 0 }, 'limits.pids'],
      [{ pids: 1.5 }, 'limits.pids'],
      [{ memoryBytes: 0 }, 'limits.memoryBytes'],
      [{ memoryBytes: 2 ** 60 }, 'limits.memoryBytes'],
      [{ cpu: 0 }, 'limits.cpu'],
      [{ cpu: Number.NaN }, 'limits.cpu'],
      [{ cpu: 1e9 }, 'limits.cpu'],
    ] as const) {
      expect(() => runtime.spawn(spec(['true']), { limits })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(field) }),
      );
    }
  });

  it("the OOM killer's first choice is a session, not the daemon", async () => {
    const handle = runtime.spawn(spec(['/bin/sh', '-c', 'cat /proc/self/oom_score_adj; sh -c "cat /proc/self/oom_score_adj"']));
    await expect(stdoutOf(handle)).resolves.toBe('500\n500\n');
    // With CAP_SYS_RESOURCE (bit 24) the daemon lowers its own score, else it keeps 0; the spawn's moment at the sessions' is over.
    const capabilities = BigInt(`0x${/^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'latin1'))![1]}`);
    const own = readFileSync('/proc/self/oom_score_adj', 'latin1').trim();
    console.log(`daemon oom_score_adj ${own}, CAP_SYS_RESOURCE ${(capabilities >> 24n) & 1n}`);
    expect(own).toBe((capabilities >> 24n) & 1n ? '-500' : '0');
  });

  it('the v1 cgroups a daemon that died left are removed when the next one makes its own', () => {
    const dead = spawnSync('true').pid;
    const left = `/sys/fs/cgroup/pids/execworld-${dead}`;
    mkdirSync(`${left}/s-1`, { recursive: true });
    const containment = new CgroupContainment({ name: `execworld-sweep-${process.pid}` });
    try {
      expect(containment.limitSupport().supported).toContain('pids');
      expect(existsSync(left)).toBe(false);
    } finally {
      removeCgroup(containment.directory);
      // Its v1 cgroups of session cgroups, beside this process's own in each hierarchy.
      for (const line of readFileSync('/proc/self/cgroup', 'latin1').split('\n')) {
        const [, controllers, path] = line.split(':');
        for (const controller of ['memory', 'pids', 'cpu', 'cpuacct']) {
          if (controllers?.split(',').includes(controller))
            removeCgroup(`/sys/fs/cgroup/${controller}${path === '/' ? '' : path}/execworld-sweep-${process.pid}`);
        }
      }
    }
  });

  it('pids 1 starts a process and a terminal, and no thread of the daemon stays in their cgroups', async () => {
    const handle = await runtime.startProcess(spec(['echo', 'one']), { limits: { pids: 1 } });
    await expect(stdoutOf(handle)).resolves.toBe('one\n');
    const terminal = await runtime.spawnTerminal(
      { argv: ['sleep', '30'], cwd: '/tmp', cols: 80, rows: 24, env: {}, graceMs: 500 },
      { limits: { pids: 1, cpu: 0.5 } },
    );
    try {
      const own = readFileSync(`/proc/${terminal.pid}/cgroup`, 'latin1');
      for (const controller of ['pids', 'cpu']) {
        const path = new RegExp(`^\\d+:${controller}:(.*)$`, 'm').exec(own)![1]!;
        const directory = `/sys/fs/cgroup/${controller}${path}`;
        // node-pty's fork starts a thread that waits for the child: it went back with the main thread.
        const daemonThreads = readFileSync(`${directory}/tasks`, 'latin1')
          .split('\n')
          .filter((tid) => tid !== '' && existsSync(`/proc/self/task/${tid}`));
        expect(daemonThreads, controller).toEqual([]);
      }
      expect(readFileSync(`/sys/fs/cgroup/pids${/^\d+:pids:(.*)$/m.exec(own)![1]!}/pids.max`, 'latin1').trim()).toBe('1');
    } finally {
      await terminal.terminate();
    }
  });

  it('a cgroup containment that looks for no controllers refuses a limit rather than ignore it', () => {
    const containment = new CgroupContainment({ name: `execworld-plain-${process.pid}`, controllers: false });
    try {
      expect(containment.limitSupport().supported).toEqual([]);
      expect(() => containment.create('limited', { pids: 4 })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('limits.pids') }),
      );
      containment.create('plain').remove();
    } finally {
      removeCgroup(containment.directory);
    }
  });

  it('a terminal is born inside its limits', async () => {
    const terminal = await runtime.spawnTerminal(
      { argv: ['/bin/sh', '-c', 'cat /proc/self/cgroup'], cwd: '/tmp', cols: 200, rows: 24, env: {}, graceMs: 1000 },
      { limits: { pids: 16 } },
    );
    let text = '';
    terminal.output.on('data', (chunk: Buffer) => (text += chunk.toString()));
    await terminal.done;
    await waitFor('the output', () => /0::/.test(text));
    // The program's v1 pids cgroup is its session's, not the daemon's.
    expect(text).toMatch(/:pids:\/execworld-\d+\/s-\d+/);
    expect(terminal.usage?.()).toMatchObject({ limitHit: null });
  });
});
