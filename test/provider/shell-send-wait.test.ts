/**
 * A send answered by the wait it was sent to. The kernel hands what is written
 * to a pty master to the reader from a work queue, so for a moment after the
 * write the program still sleeps in the same read, with the same wait token.
 * The shell engine must not take that for a new wait: the answer to a send is
 * a new wait (a new token) or the command's end. Here the terminal's writes
 * are held until the engine has looked at the foreground once, which makes
 * that moment certain instead of rare.
 */
import { afterAll, expect, test } from 'vitest';
import type { SubprocessRuntime, SubprocessTerminalHandle } from '@execworld/sdk/seam';
import { PersistentShell } from '@execworld/sdk/shell';
import { LocalRuntime } from '@execworld/service';

const runtime = new LocalRuntime();
afterAll(() => runtime.dispose());

/** `runtime`, whose terminals hold each write after the first run until the engine has inspected the foreground. */
function slowToDeliver(inner: SubprocessRuntime): { runtime: SubprocessRuntime; held: () => number } {
  let held = 0;
  const wrap = (terminal: SubprocessTerminalHandle): SubprocessTerminalHandle => {
    /** The held write, made when the engine next inspects the foreground; a failure of it surfaces as an unhandled rejection. */
    let release: (() => Promise<void>) | undefined;
    let armed = false;
    return new Proxy(terminal, {
      get(target, name, receiver) {
        if (name === 'write') {
          return (data: string): Promise<void> => {
            if (!armed) return target.write(data);
            held += 1;
            release = () => target.write(data);
            // The caller is told the write is done, as the kernel's write returns before the reader gets it.
            return Promise.resolve();
          };
        }
        if (name === 'inspectForeground') {
          return async () => {
            const facts = await target.inspectForeground();
            const pending = release;
            release = undefined;
            void pending?.();
            return facts;
          };
        }
        if (name === 'arm') return () => (armed = true);
        const value: unknown = Reflect.get(target, name, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
  const runtime = new Proxy(inner, {
    get(target, name, receiver) {
      if (name === 'spawnTerminal') {
        return async (...args: unknown[]) => wrap(await (target.spawnTerminal as (...a: unknown[]) => Promise<SubprocessTerminalHandle>).apply(target, args));
      }
      const value: unknown = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { runtime, held: () => held };
}

test.runIf(process.platform === 'linux')('answers a send with the end of the command, never with the wait the input was sent to', async () => {
  const slow = slowToDeliver(runtime);
  const shell = await PersistentShell.start(slow.runtime, { cwd: '/tmp' });
  try {
    const asked = await shell.run('read -p "continue? " yes; echo "got $yes"; exit 4');
    expect(asked).toMatchObject({ reason: 'waiting_for_input' });
    ((await shell.terminal) as unknown as { arm(): void }).arm();
    const ended = await shell.send('y\n');
    expect(slow.held()).toBe(1);
    expect(ended).toMatchObject({ reason: 'shell_exited', exitCode: 4 });
    expect(ended.output).toContain('got y');
  } finally {
    await shell.close();
  }
});
