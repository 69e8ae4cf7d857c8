/**
 * The limits contract (limits-contract.ts) over both runtimes: LocalRuntime
 * in-process, and RemoteRuntime over a daemon on 127.0.0.1, each holding its
 * sessions in cgroups.
 */
import { LocalRuntime } from '@execworld/service';
import { connectedDaemon } from '../helpers/daemon-test.ts';
import { defineLimitsContract } from './limits-contract.ts';

defineLimitsContract('LocalRuntime', () => {
  const runtime = new LocalRuntime({ containment: 'cgroup' });
  return Promise.resolve({ runtime, close: () => runtime.dispose() });
});

// The suite's daemon is made in its beforeAll and closed in its afterAll.
defineLimitsContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const {
    runtimes: [runtime],
    close,
  } = await connectedDaemon(1, { containment: 'cgroup' });
  return { runtime: runtime!, close };
});
