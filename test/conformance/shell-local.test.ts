import { LocalRuntime } from '@execworld/service';
import { defineShellContract } from './shell-contract.ts';

defineShellContract('LocalRuntime', () => {
  const runtime = new LocalRuntime();
  return Promise.resolve({ runtime, close: () => runtime.dispose() });
});
