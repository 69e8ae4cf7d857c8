import { connect } from '@execworld/sdk';
import { ALICE, startInProcessDaemon } from '../helpers/daemon.ts';
import { definePwshShellContract } from './shell-pwsh-contract.ts';
import { defineShellContract } from './shell-contract.ts';

defineShellContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const daemon = await startInProcessDaemon();
  const runtime = await connect(daemon.url, { token: ALICE });
  return { runtime, close: () => runtime.dispose().then(() => daemon.close()) };
});

definePwshShellContract('RemoteRuntime over a daemon on 127.0.0.1', async () => {
  const daemon = await startInProcessDaemon();
  const runtime = await connect(daemon.url, { token: ALICE });
  return { runtime, close: () => runtime.dispose().then(() => daemon.close()) };
});
