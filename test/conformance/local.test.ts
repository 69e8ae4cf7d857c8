import { LocalRuntime, type LocalTerminal } from '@execworld/service';
import { definePagerContract } from './pager-contract.ts';
import { defineProcessContract, LINUX_WORLD } from './process-contract.ts';
import { defineRuntimeContract } from './runtime-contract.ts';

defineRuntimeContract('LocalRuntime', () => {
  const runtime = new LocalRuntime();
  return Promise.resolve({
    runtime,
    resize: (terminal, cols, rows) => Promise.resolve((terminal as LocalTerminal).resize(cols, rows)),
    started: (handle) => Promise.resolve(handle.pid),
    close: () => runtime.dispose(),
  });
});

defineProcessContract(
  'LocalRuntime',
  () => {
    const runtime = new LocalRuntime();
    return Promise.resolve({ runtime, started: (handle) => Promise.resolve(handle.pid), close: () => runtime.dispose() });
  },
  LINUX_WORLD,
);

definePagerContract('LocalRuntime', () => Promise.resolve(new LocalRuntime()).then((runtime) => ({ runtime, close: () => runtime.dispose() })));
