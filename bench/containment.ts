/**
 * What cgroup containment costs a spawn: the synchronous spawn call (which
 * moves this process into the session's cgroup and back) and a whole cycle
 * (spawn, exit, cleanup: cgroup made and removed), side by side with no
 * containment, interleaved so both see the same machine (bench/lib/spawn-cost.ts).
 * Run as root on a host with a writable cgroup v2 hierarchy:
 *
 *   npx tsx bench/containment.ts [rounds=50]
 */
import { LocalRuntime } from '../service/src/provider/local-runtime.ts';
import { compareSpawnCost } from './lib/spawn-cost.ts';

await compareSpawnCost(
  { cgroup: { runtime: new LocalRuntime({ containment: 'cgroup' }) }, none: { runtime: new LocalRuntime({ containment: 'none' }) } },
  Number(process.argv[2] ?? 50),
);
