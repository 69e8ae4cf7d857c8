import { connectedDaemon } from '../helpers/daemon-test.ts';
import { definePwshShellContract } from './shell-pwsh-contract.ts';
import { defineShellContract } from './shell-contract.ts';

// Each contract's suite has a daemon of its own, made in its beforeAll and closed in its afterAll.
defineShellContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const {
    runtimes: [runtime],
    close,
  } = await connectedDaemon();
  return { runtime: runtime!, close };
});

definePwshShellContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const {
    runtimes: [runtime],
    close,
  } = await connectedDaemon();
  return { runtime: runtime!, close };
});
