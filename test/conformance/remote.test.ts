import type { RemoteProcess, RemoteTerminal } from '@execworld/sdk';
import { connectedDaemon } from '../helpers/daemon-test.ts';
import { definePagerContract } from './pager-contract.ts';
import { defineProcessContract, LINUX_WORLD } from './process-contract.ts';
import { defineRuntimeContract } from './runtime-contract.ts';

// Each contract's suite has a daemon of its own, made in its beforeAll and closed in its afterAll.
defineRuntimeContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const {
    runtimes: [runtime],
    close,
  } = await connectedDaemon();
  return {
    runtime: runtime!,
    resize: (terminal, cols, rows) => (terminal as RemoteTerminal).resize(cols, rows),
    started: async (handle) => (await (handle as RemoteProcess).started.catch(() => ({ pid: -1 }))).pid,
    close,
  };
});

defineProcessContract(
  'RemoteRuntime over a daemon on 127.0.0.1',
  async () => {
    const {
      runtimes: [runtime],
      close,
    } = await connectedDaemon();
    return { runtime: runtime!, started: async (handle) => (await (handle as RemoteProcess).started.catch(() => ({ pid: -1 }))).pid, close };
  },
  { ...LINUX_WORLD, pidAtSpawn: 'after-start', spawnFailure: 'catalog' },
);

definePagerContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const {
    runtimes: [runtime],
    close,
  } = await connectedDaemon();
  return { runtime: runtime!, close };
});
