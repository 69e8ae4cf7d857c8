/**
 * The filesystem contract over the three providers: the reference
 * (`@deepseek-ai/dsh-fs-local`), the daemon's `WorldFiles` in-process, and
 * `RemoteFiles` over a real daemon.
 */
import '../helpers/with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import { LocalFileSystem } from '@deepseek-ai/dsh-fs-local';
import type { FsProvider } from '@execworld/sdk/fs';
import { RemoteFiles } from '@execworld/sdk/fs';
import { WorldFiles } from '../../service/src/provider/fs/world-files.ts';
import { MutationLocks } from '../../service/src/provider/fs/mutation-locks.ts';
import { connectedDaemon } from '../helpers/daemon-test.ts';
import { fsContract } from './fs-contract.ts';

async function reference(dir: string): Promise<FsProvider> {
  const root = new Context();
  await root.plugin(LocalFileSystem, { cwd: dir });
  return (root as unknown as { fs: FsProvider }).fs;
}

// The reference serializes writers within one instance only: its two instances are two processes' worth.
fsContract('dsh-fs-local (reference)', async (dir) => ({ fs: await reference(dir), other: await reference(dir), close: () => Promise.resolve() }), {
  sharedTurns: false,
});

fsContract(
  'WorldFiles (the daemon, in-process)',
  (dir) => {
    const locks = new MutationLocks();
    return Promise.resolve({
      fs: new WorldFiles({ cwd: dir, locks }),
      other: new WorldFiles({ cwd: dir, locks }),
      close: () => Promise.resolve(),
    });
  },
  { sharedTurns: true },
);

fsContract(
  'RemoteFiles (over a daemon)',
  // The suite's daemon, made in its beforeAll and closed in its afterAll, with two connections: two clients' writers.
  async (dir) => {
    const {
      runtimes: [first, second],
      close,
    } = await connectedDaemon(2);
    return { fs: new RemoteFiles(first!, { cwd: dir }), other: new RemoteFiles(second!, { cwd: dir }), close };
  },
  { sharedTurns: true },
);
