/**
 * Session limits and usage through a runtime's own API, one body for each
 * runtime (local and remote): `limits` on a spawn, a terminal, a one-call run
 * and a persistent shell; `usage()` on the handles once they ended, and on a
 * run's result. The runtime's world must hold sessions in cgroups with the
 * memory, pids and cpu controllers (this machine's, v1 on a hybrid host).
 *
 * Each scenario is bounded so that it cannot hurt the machine: the fork bomb
 * stops at 200 forks under 64 pids, the allocation is 600 MiB under a
 * 100 MiB limit, the busy loop runs 2 s under a quarter core.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommandResult, RunCommandOptions, SpawnRequest, SubprocessHandle, TerminalSpawnRequest, UsageReporting } from '@execworld/sdk';
import type { SubprocessRuntime, SubprocessTerminalHandle } from '@execworld/sdk/seam';
import { PersistentShell } from '@execworld/sdk/shell';
import { FORK_BOMB } from '../fixtures/fork-bomb.ts';
import { waitFor } from '../helpers/wait.ts';

/** A runtime that takes `limits` and reports usage: both of execworld's. */
export type LimitedRuntime = {
  spawn(request: SpawnRequest): SubprocessHandle & UsageReporting;
  spawnTerminal(request: TerminalSpawnRequest): Promise<SubprocessTerminalHandle & UsageReporting>;
  run(command: string | readonly string[], options?: RunCommandOptions): Promise<CommandResult>;
} & SubprocessRuntime;

export interface LimitsSubject {
  readonly runtime: LimitedRuntime;
  close(): Promise<void>;
}

const COLLECT = { stdin: 'ignore', stdout: { maxBytes: 65_536 }, stderr: { maxBytes: 65_536 } } as const;
const python = (script: string, limits: SpawnRequest['limits']): SpawnRequest => ({
  argv: ['python3', '-c', script],
  cwd: '/tmp',
  stdio: COLLECT,
  graceMs: 1000,
  limits,
});
const stdoutOf = (handle: SubprocessHandle): string => handle.collected.stdout?.readFrom(0).text ?? '';
/** The file of a controller's v1 cgroup of the reading process (this host is hybrid: memory, pids and cpu are v1). */
const controlFile = (controller: string, file: string): string => `/sys/fs/cgroup/${controller}$(grep :${controller}: /proc/self/cgroup | cut -d: -f3)/${file}`;

export function defineLimitsContract(name: string, make: () => Promise<LimitsSubject>): void {
  describe(`${name}: limits and usage`, () => {
    let subject: LimitsSubject;
    let runtime: LimitedRuntime;
    beforeAll(async () => {
      subject = await make();
      runtime = subject.runtime;
    });
    afterAll(() => subject.close());

    it('a fork bomb under pids 64: its forks fail, another session runs meanwhile, limitHit is pids', async () => {
      const bomb = runtime.spawn(python(FORK_BOMB, { pids: 64 }));
      // The bomb prints once it tried its 200 forks, then holds its children 3 s: another session starts and answers then.
      await waitFor('the bomb to try its forks', () => stdoutOf(bomb) !== '', 30_000);
      const started = performance.now();
      const other = await runtime.run(['echo', 'other'], { cwd: '/tmp' });
      console.log(`${name}: another session's echo while the pids bomb holds its pids: ${(performance.now() - started).toFixed(1)} ms`);
      expect(other).toMatchObject({ exitCode: 0, stdout: 'other\n' });
      await expect(bomb.done).resolves.toEqual({ exitCode: 0, signal: null });
      const [made, failed] = stdoutOf(bomb).trim().split(' ').map(Number);
      console.log(`${name}: fork bomb under pids 64: ${made} forks made, ${failed} failed; usage ${JSON.stringify(bomb.usage())}`);
      expect(made).toBeLessThan(64);
      expect(failed).toBeGreaterThan(0);
      expect(bomb.usage()).toMatchObject({ limitHit: 'pids', oomKilled: false });
    });

    it('600 MiB under a 100 MiB limit: only it dies, oomKilled, and another session runs on', async () => {
      const bystander = runtime.spawn({ argv: ['sleep', '30'], cwd: '/tmp', stdio: COLLECT, graceMs: 1000 });
      const hog = runtime.spawn(python(`x = b'x' * (600 << 20)\nprint('survived')`, { memoryBytes: 100 << 20 }));
      await expect(hog.done).resolves.toEqual({ exitCode: null, signal: 'SIGKILL' });
      const usage = hog.usage();
      console.log(`${name}: memory hog usage ${JSON.stringify(usage)}`);
      expect(stdoutOf(hog)).toBe('');
      expect(usage).toMatchObject({ limitHit: 'memory', oomKilled: true });
      expect(usage?.peakMemoryBytes).toBeGreaterThan(50 << 20);
      expect(usage?.peakMemoryBytes).toBeLessThanOrEqual(100 << 20);
      // The bystander lived through it: it is there to be terminated, and ends by that SIGTERM.
      bystander.terminate();
      await expect(bystander.done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
      expect(bystander.usage()).toMatchObject({ oomKilled: false });
    });

    it('a busy loop under cpu 0.25 uses about a quarter core', async () => {
      const started = performance.now();
      const loop = runtime.spawn(python('import time\nend = time.monotonic() + 2\nwhile time.monotonic() < end: pass', { cpu: 0.25 }));
      await loop.done;
      const wallMs = performance.now() - started;
      const usage = loop.usage();
      const cores = ((usage?.cpuUserMs ?? 0) + (usage?.cpuSystemMs ?? 0)) / wallMs;
      console.log(`${name}: busy loop under cpu 0.25: ${cores.toFixed(3)} cores over ${wallMs.toFixed(0)} ms; usage ${JSON.stringify(usage)}`);
      expect(usage?.limitHit).toBe('cpu');
      expect(cores).toBeGreaterThan(0.05);
      expect(cores).toBeLessThan(0.35);
    });

    it("a run's result carries usage: dd | sha256sum is non-zero and plausible, and a run takes limits", async () => {
      const result = await runtime.run('dd if=/dev/zero bs=1M count=256 status=none | sha256sum', { cwd: '/tmp' });
      console.log(`${name}: dd | sha256sum usage ${JSON.stringify(result.usage)}`);
      expect(result.stdout).toMatch(/^[0-9a-f]{64} {2}-\n$/);
      expect((result.usage?.cpuUserMs ?? 0) + (result.usage?.cpuSystemMs ?? 0)).toBeGreaterThan(50);
      expect(result.usage?.cpuUserMs).toBeLessThan(60_000);
      // dd holds one 1 MiB block; the pipe and the programs add a few more.
      expect(result.usage?.peakMemoryBytes).toBeGreaterThan(1 << 20);
      expect(result.usage?.peakMemoryBytes).toBeLessThan(512 << 20);
      expect(result.usage).toMatchObject({ limitHit: null, oomKilled: false });
      // The spawn holds the limit one or two higher for its instant (the daemon's own thread is inside then):
      // the file is read once the input came, which is after the create.
      const limited = await runtime.run(`read _ && cat ${controlFile('pids', 'pids.max')}`, { cwd: '/tmp', limits: { pids: 48 }, stdin: 'go\n' });
      expect(limited).toMatchObject({ exitCode: 0, stdout: '48\n' });
    });

    it('a terminal runs under its limits, and its usage says so once it ended', async () => {
      const terminal = await runtime.spawnTerminal({
        // Read once the input came, after the create: the spawn's instant holds the limit higher.
        argv: ['/bin/sh', '-c', `read _ && cat ${controlFile('pids', 'pids.max')}; exit 3`],
        cwd: '/tmp',
        rows: 24,
        cols: 200,
        env: {},
        graceMs: 1000,
        limits: { pids: 24 },
      });
      let text = '';
      terminal.output.on('data', (chunk: Buffer) => (text += chunk.toString()));
      await terminal.write('go\r');
      await expect(terminal.done).resolves.toEqual({ exitCode: 3, signal: null });
      expect(text).toMatch(/^24\r$/m);
      expect(terminal.usage()).toMatchObject({ limitHit: null, oomKilled: false });
    });

    it("a persistent shell's commands share its limits", async () => {
      const shell = await PersistentShell.start(runtime, { cwd: '/tmp', limits: { pids: 40 } });
      try {
        const run = await shell.run(`cat ${controlFile('pids', 'pids.max')}`);
        expect(run).toMatchObject({ exitCode: 0, output: expect.stringContaining('40') });
      } finally {
        await shell.close();
      }
    });

    it("a persistent shell's run reports its own command's usage: a cpu-burning one non-zero cpu, a quiet one near none", async () => {
      const shell = await PersistentShell.start(runtime, { cwd: '/tmp', limits: { pids: 40 } });
      try {
        // A fixed amount of work (hashing 256 MiB), so its cpu does not depend on how busy the machine is.
        const busy = await shell.run('dd if=/dev/zero bs=1M count=256 status=none | sha256sum');
        const quiet = await shell.run('true');
        const cpu = (usage: typeof busy.usage): number => (usage?.cpuUserMs ?? 0) + (usage?.cpuSystemMs ?? 0);
        console.log(`${name}: shell runs' usage: dd | sha256sum ${JSON.stringify(busy.usage)}; true ${JSON.stringify(quiet.usage)}`);
        expect(busy).toMatchObject({ exitCode: 0, output: expect.stringMatching(/[0-9a-f]{64}/) });
        expect(busy.usage).toMatchObject({ limitHit: null, oomKilled: false, peakScope: expect.stringMatching(/^(run|session)$/) });
        expect(cpu(busy.usage)).toBeGreaterThan(100);
        // The quiet run's is its own: not the busy one's again, nor the shell's since it started.
        expect(quiet.usage).toBeDefined();
        expect(cpu(quiet.usage)).toBeLessThan(50);
        expect(quiet.usage?.peakMemoryBytes).toBeGreaterThan(0);
      } finally {
        await shell.close();
      }
    });
  });
}
