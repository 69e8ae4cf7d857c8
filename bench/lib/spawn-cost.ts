/**
 * What a mode of containment costs a spawn, side by side: the synchronous
 * spawn call (which moves this process into the session's cgroups and back)
 * and a whole cycle (spawn, exit, cleanup: cgroups made and removed), of a
 * process and of a terminal running /bin/true. The modes run interleaved, in
 * an order that rotates each round, so all see the same machine and none
 * always runs right after another; a warm-up round of each (module loading,
 * the first cgroups) is not measured. Shared by bench/containment.ts and
 * bench/limits.ts.
 */
import type { SessionLimits } from '../../service/src/provider/containment/containment.ts';
import type { LocalRuntime } from '../../service/src/provider/local-runtime.ts';
import { median, percentile } from './stats.ts';

/** One column of the comparison: a runtime, and the limits its sessions are held to. */
export interface SpawnMode {
  readonly runtime: LocalRuntime;
  readonly limits?: SessionLimits | undefined;
}

/** Runs `rounds` rounds of each mode, prints median and p90 of each figure in milliseconds, and disposes the runtimes. */
export async function compareSpawnCost(modes: Readonly<Record<string, SpawnMode>>, rounds: number, note = ''): Promise<void> {
  const figures = new Map<string, number[]>();
  const add = (name: string, value: number): void => {
    const list = figures.get(name) ?? [];
    list.push(value);
    figures.set(name, list);
  };
  const ms = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;

  async function processRound(mode: string): Promise<void> {
    const { runtime, limits } = modes[mode]!;
    const start = process.hrtime.bigint();
    const handle = runtime.spawn({ argv: ['/bin/true'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 }, { limits });
    add(`process spawn call, ${mode}`, ms(start));
    handle.stdout?.resume();
    handle.stderr?.resume();
    await handle.done;
    await handle.waitForExit();
    add(`process cycle, ${mode}`, ms(start));
  }

  async function terminalRound(mode: string): Promise<void> {
    const { runtime, limits } = modes[mode]!;
    const start = process.hrtime.bigint();
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/true'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 }, { limits });
    add(`terminal spawn call, ${mode}`, ms(start));
    terminal.output.resume();
    await terminal.done;
    await terminal.terminate();
    add(`terminal cycle, ${mode}`, ms(start));
  }

  const all = Object.keys(modes);
  for (const mode of all) {
    await processRound(mode);
    await terminalRound(mode);
  }
  figures.clear();
  for (let round = 0; round < rounds; round += 1) {
    const order = all.map((_, index) => all[(index + round) % all.length]!);
    for (const mode of order) await processRound(mode);
    for (const mode of order) await terminalRound(mode);
  }
  await Promise.all([...new Set(Object.values(modes).map((mode) => mode.runtime))].map((runtime) => runtime.dispose()));

  const width = Math.max(...[...figures.keys()].map((name) => name.length), 'figure'.length);
  console.log(`rounds: ${rounds}; milliseconds${note === '' ? '' : `; ${note}`}`);
  console.log(`${'figure'.padEnd(width)} ${'median'.padStart(8)} ${'p90'.padStart(8)}`);
  for (const [name, values] of [...figures].sort(([a], [b]) => a.localeCompare(b))) {
    console.log(`${name.padEnd(width)} ${median(values).toFixed(3).padStart(8)} ${percentile(values, 90).toFixed(3).padStart(8)}`);
  }
}
