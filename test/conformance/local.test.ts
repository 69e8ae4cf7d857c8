import { LocalRuntime, type LocalTerminal } from '@execworld/service';
import { defineRuntimeContract } from './runtime-contract.ts';

defineRuntimeContract(
  'LocalRuntime',
  () => {
    const runtime = new LocalRuntime();
    return Promise.resolve({
      runtime,
      resize: (terminal, cols, rows) => Promise.resolve((terminal as LocalTerminal).resize(cols, rows)),
      started: (handle) => Promise.resolve(handle.pid),
      close: () => runtime.dispose(),
    });
  },
  { pidAtSpawn: 'immediate', spawnFailure: 'errno' },
);
