import { connect, type RemoteProcess, type RemoteTerminal } from '@execworld/sdk';
import { ALICE, startInProcessDaemon } from '../helpers/daemon.ts';
import { definePagerContract } from './pager-contract.ts';
import { defineProcessContract, LINUX_WORLD } from './process-contract.ts';
import { defineRuntimeContract } from './runtime-contract.ts';

defineRuntimeContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const daemon = await startInProcessDaemon();
  const runtime = await connect(daemon.url, { token: ALICE });
  return {
    runtime,
    resize: (terminal, cols, rows) => (terminal as RemoteTerminal).resize(cols, rows),
    started: async (handle) => (await (handle as RemoteProcess).started.catch(() => ({ pid: -1 }))).pid,
    close: async () => {
      await runtime.dispose();
      await daemon.close();
    },
  };
});

defineProcessContract(
  'RemoteRuntime over a daemon on 127.0.0.1',
  async () => {
    const daemon = await startInProcessDaemon();
    const runtime = await connect(daemon.url, { token: ALICE });
    return {
      runtime,
      started: async (handle) => (await (handle as RemoteProcess).started.catch(() => ({ pid: -1 }))).pid,
      close: async () => {
        await runtime.dispose();
        await daemon.close();
      },
    };
  },
  { ...LINUX_WORLD, pidAtSpawn: 'after-start', spawnFailure: 'catalog' },
);

definePagerContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const daemon = await startInProcessDaemon();
  const runtime = await connect(daemon.url, { token: ALICE });
  return { runtime, close: () => runtime.dispose().then(() => daemon.close()) };
});
