/**
 * What limits cost a spawn: the synchronous spawn call (which moves this
 * process into the session's cgroups and back) and a whole cycle (spawn,
 * exit, cleanup: cgroups made and removed), side by side: no containment, a
 * cgroup with the accounting cells only (what every session gets), and a
 * cgroup held to memory, pids and cpu limits. Interleaved so all see the same
 * machine. Run as root on a host with cgroups (v2, or hybrid with v1
 * controllers):
 *
 *   npx tsx bench/limits.ts [rounds=50]
 */
import { LocalRuntime } from '../service/src/provider/local-runtime.ts';
import type { SessionLimits } from '../service/src/provider/containment/containment.ts';
import { median, percentile } from './lib/stats.ts';

const rounds = Number(process.argv[2] ?? 50);
const cgroup = new LocalRuntime({ containment: 'cgroup' });
const none = new LocalRuntime({ containment: 'none' });
const LIMITS: SessionLimits = { memoryBytes: 256 * 1024 * 1024, pids: 256, cpu: 1 };
const modes = {
  none: { runtime: none, limits: undefined },
  cgroup: { runtime: cgroup, limits: undefined },
  'cgroup+limits': { runtime: cgroup, limits: LIMITS },
} as const;
type Mode = keyof typeof modes;
const figures = new Map<string, number[]>();
const add = (name: string, value: number): void => {
  const list = figures.get(name) ?? [];
  list.push(value);
  figures.set(name, list);
};
const ms = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;

async function processRound(mode: Mode): Promise<void> {
  const { runtime, limits } = modes[mode];
  const start = process.hrtime.bigint();
  const handle = runtime.spawn({ argv: ['/bin/true'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 }, { limits });
  add(`process spawn call, ${mode}`, ms(start));
  handle.stdout?.resume();
  handle.stderr?.resume();
  await handle.done;
  await handle.waitForExit();
  add(`process cycle, ${mode}`, ms(start));
}

async function terminalRound(mode: Mode): Promise<void> {
  const { runtime, limits } = modes[mode];
  const start = process.hrtime.bigint();
  const terminal = await runtime.spawnTerminal({ argv: ['/bin/true'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 }, { limits });
  add(`terminal spawn call, ${mode}`, ms(start));
  terminal.output.resume();
  await terminal.done;
  await terminal.terminate();
  add(`terminal cycle, ${mode}`, ms(start));
}

const all = Object.keys(modes) as Mode[];
// A warm-up round each: module loading and the first cgroups are not what is measured.
for (const mode of all) {
  await processRound(mode);
  await terminalRound(mode);
}
figures.clear();
for (let round = 0; round < rounds; round += 1) {
  // A rotating order, so no mode always runs right after another.
  const order = all.map((_, index) => all[(index + round) % all.length]!);
  for (const mode of order) await processRound(mode);
  for (const mode of order) await terminalRound(mode);
}
await Promise.all([cgroup.dispose(), none.dispose()]);

console.log(`rounds: ${rounds}; milliseconds; limits ${JSON.stringify(LIMITS)}`);
console.log(`${'figure'.padEnd(36)} ${'median'.padStart(8)} ${'p90'.padStart(8)}`);
for (const [name, values] of [...figures].sort(([a], [b]) => a.localeCompare(b))) {
  console.log(`${name.padEnd(36)} ${median(values).toFixed(3).padStart(8)} ${percentile(values, 90).toFixed(3).padStart(8)}`);
}
