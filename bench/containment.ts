/**
 * What cgroup containment costs a spawn: the synchronous spawn call (which
 * moves this process into the session's cgroup and back) and a whole cycle
 * (spawn, exit, cleanup: cgroup made and removed), side by side with no
 * containment, interleaved so both see the same machine. Run as root on a
 * host with a writable cgroup v2 hierarchy:
 *
 *   npx tsx bench/containment.ts [rounds=50]
 */
import { LocalRuntime } from '../service/src/provider/local-runtime.ts';
import { median, percentile } from './lib/stats.ts';

const rounds = Number(process.argv[2] ?? 50);
const runtimes = { cgroup: new LocalRuntime({ containment: 'cgroup' }), none: new LocalRuntime({ containment: 'none' }) };
type Mode = keyof typeof runtimes;
const figures = new Map<string, number[]>();
const add = (name: string, value: number): void => {
  const list = figures.get(name) ?? [];
  list.push(value);
  figures.set(name, list);
};
const ms = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;

async function processRound(mode: Mode): Promise<void> {
  const start = process.hrtime.bigint();
  const handle = runtimes[mode].spawn({ argv: ['/bin/true'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 });
  add(`process spawn call, ${mode}`, ms(start));
  handle.stdout?.resume();
  handle.stderr?.resume();
  await handle.done;
  await handle.waitForExit();
  add(`process cycle, ${mode}`, ms(start));
}

async function terminalRound(mode: Mode): Promise<void> {
  const start = process.hrtime.bigint();
  const terminal = await runtimes[mode].spawnTerminal({ argv: ['/bin/true'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
  add(`terminal spawn call, ${mode}`, ms(start));
  terminal.output.resume();
  await terminal.done;
  await terminal.terminate();
  add(`terminal cycle, ${mode}`, ms(start));
}

// A warm-up round each: module loading and the first cgroup are not what is measured.
for (const mode of ['cgroup', 'none'] as const) {
  await processRound(mode);
  await terminalRound(mode);
}
figures.clear();
for (let round = 0; round < rounds; round += 1) {
  // Alternating order, so neither mode always runs right after the other.
  const order: Mode[] = round % 2 === 0 ? ['cgroup', 'none'] : ['none', 'cgroup'];
  for (const mode of order) await processRound(mode);
  for (const mode of order) await terminalRound(mode);
}
await Promise.all(Object.values(runtimes).map((runtime) => runtime.dispose()));

console.log(`rounds: ${rounds}; milliseconds`);
console.log(`${'figure'.padEnd(32)} ${'median'.padStart(8)} ${'p90'.padStart(8)}`);
for (const [name, values] of [...figures].sort(([a], [b]) => a.localeCompare(b))) {
  console.log(`${name.padEnd(32)} ${median(values).toFixed(3).padStart(8)} ${percentile(values, 90).toFixed(3).padStart(8)}`);
}
