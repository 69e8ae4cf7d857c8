import { LocalRuntime } from '@execworld/service';
import { definePwshShellContract } from './shell-pwsh-contract.ts';
import { defineShellContract } from './shell-contract.ts';

defineShellContract('LocalRuntime', () => {
  const runtime = new LocalRuntime();
  return Promise.resolve({ runtime, close: () => runtime.dispose() });
});

definePwshShellContract('LocalRuntime', () => {
  const runtime = new LocalRuntime();
  return Promise.resolve({ runtime, close: () => runtime.dispose() });
});
