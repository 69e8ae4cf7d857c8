/**
 * `npm run bench:windows`: the Windows provider's process-table and
 * tree-ending costs, measured under Windows node.exe (in the Windows lane's
 * Wine prefix), side by side with the reference's approach in one run.
 *
 * - A Toolhelp32 snapshot: the raw walk, and the inspector's table (each row
 *   with its identity read through its own handle).
 * - An identity check (`isAlive`: OpenProcess, GetProcessTimes, a zero-time
 *   wait).
 * - Ending a 5-process tree: `TerminateJobObject` against `taskkill /F` of
 *   each process (the reference's `taskkill /T /F` of the root does not exist
 *   in Wine), from the order to every process gone.
 *
 * Wine is not Windows: the figures show the shape of the costs, not what a
 * Windows machine measures.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobObjectContainment } from '../service/src/provider/containment/job-object.ts';
import { Win32Inspector } from '../service/src/provider/inspect/win32.ts';
import type { ProcessIdentity } from '../service/src/provider/inspect/inspector.ts';
import { loadKernel32 } from '../service/src/provider/win32/kernel32.ts';
import { WindowsProcesses } from '../service/src/provider/win32/processes.ts';

const rounds = Number(process.argv[2] ?? '5');
const kernel32 = loadKernel32();
const processes = new WindowsProcesses(kernel32);
const inspector = new Win32Inspector(() => processes);

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function timed(times: number, run: () => void): number[] {
  const samples: number[] = [];
  for (let i = 0; i < times; i += 1) {
    const start = performance.now();
    run();
    samples.push(performance.now() - start);
  }
  return samples;
}

const fmt = (ms: number): string => (ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`);

/** A root that, once told to, starts four children, all waiting; answers their pids once all run. */
async function fiveProcessTree(beforeChildren: (root: ChildProcess) => void): Promise<{ root: ChildProcess; pids: number[] }> {
  const script =
    "process.stdin.once('data', () => { const cp = require('child_process'); const pids = [process.pid]; for (let i = 0; i < 4; i++) pids.push(cp.spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore', detached: true }).pid); console.log(pids.join(' ')) }); setTimeout(() => {}, 600000)";
  const root = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise((resolve) => root.once('spawn', resolve));
  beforeChildren(root);
  let text = '';
  root.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
  root.stdin.write('go\n');
  while (!text.includes('\n')) await sleep(10);
  const pids = text.trim().split(' ').map(Number);
  // Every child runs before the clock starts.
  while (pids.some((pid) => inspector.identity(pid) === undefined)) await sleep(10);
  return { root, pids };
}

async function goneAfter(identities: readonly ProcessIdentity[], order: () => void): Promise<number> {
  const start = performance.now();
  order();
  while (identities.some((identity) => inspector.isAlive(identity))) await sleep(1);
  return performance.now() - start;
}

const wine = kernel32.wineVersion();
console.log(`Windows provider costs, under ${wine === undefined ? 'Windows' : `Wine ${wine} (not Windows: the shape of the costs only)`}`);
const rows = kernel32.processEntries()?.length ?? 0;
const raw = timed(200, () => kernel32.processEntries());
const table = timed(200, () => inspector.snapshot());
const self = inspector.identity(process.pid)!;
const check = timed(2000, () => inspector.isAlive(self));
console.log(`processes in the table: ${rows}`);
console.log(`Toolhelp32 walk            p50 ${fmt(percentile(raw, 50))}  p99 ${fmt(percentile(raw, 99))}`);
console.log(`inspector table (+ids)     p50 ${fmt(percentile(table, 50))}  p99 ${fmt(percentile(table, 99))}`);
console.log(`identity check (isAlive)   p50 ${fmt(percentile(check, 50))}  p99 ${fmt(percentile(check, 99))}`);

const job: number[] = [];
const taskkill: number[] = [];
const containment = new JobObjectContainment(kernel32, processes);
for (let round = 0; round < rounds; round += 1) {
  // Alternate which goes first, so neither always runs on a warmer machine.
  for (const method of round % 2 === 0 ? (['job', 'taskkill'] as const) : (['taskkill', 'job'] as const)) {
    const cell = containment.create(`bench-${round}`)!;
    // The root joins the job before it starts its children, which are born in it.
    const { root, pids } = await fiveProcessTree((started) => cell.attach(started.pid!));
    const identities = pids.map((pid) => inspector.identity(pid)!);
    if (method === 'job') {
      job.push(await goneAfter(identities, () => cell.kill()));
    } else {
      taskkill.push(
        await goneAfter(identities, () => {
          for (const pid of pids) spawnSync('taskkill', ['/F', '/PID', String(pid)], { stdio: 'ignore', windowsHide: true });
        }),
      );
    }
    cell.kill();
    cell.remove();
    root.kill();
  }
}
const median = (values: number[]): number => percentile(values, 50);
console.log(`end a 5-process tree (${rounds} rounds, median [min–max])`);
console.log(`  TerminateJobObject       ${fmt(median(job))} [${fmt(Math.min(...job))}–${fmt(Math.max(...job))}]`);
console.log(`  taskkill /F of each      ${fmt(median(taskkill))} [${fmt(Math.min(...taskkill))}–${fmt(Math.max(...taskkill))}]`);
console.log(`  ratio job / taskkill     ${(median(job) / median(taskkill)).toFixed(3)}x`);
