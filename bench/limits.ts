/**
 * What limits cost a spawn: the synchronous spawn call (which moves this
 * process into the session's cgroups and back) and a whole cycle (spawn,
 * exit, cleanup: cgroups made and removed), side by side: no containment, a
 * cgroup with the accounting cells only (what every session gets), and a
 * cgroup held to memory, pids and cpu limits. Interleaved so all see the same
 * machine (bench/lib/spawn-cost.ts). Run as root on a host with cgroups (v2,
 * or hybrid with v1 controllers):
 *
 *   npx tsx bench/limits.ts [rounds=50]
 */
import { LocalRuntime } from '../service/src/provider/local-runtime.ts';
import type { SessionLimits } from '../service/src/provider/containment/containment.ts';
import { compareSpawnCost } from './lib/spawn-cost.ts';

const cgroup = new LocalRuntime({ containment: 'cgroup' });
const LIMITS: SessionLimits = { memoryBytes: 256 * 1024 * 1024, pids: 256, cpu: 1 };
await compareSpawnCost(
  { none: { runtime: new LocalRuntime({ containment: 'none' }) }, cgroup: { runtime: cgroup }, 'cgroup+limits': { runtime: cgroup, limits: LIMITS } },
  Number(process.argv[2] ?? 50),
  `limits ${JSON.stringify(LIMITS)}`,
);
