/**
 * The real @deepseek-ai/dsh-terminal-bash PTY backend over LocalRuntime, loaded
 * through our cordis plugin as ctx.subprocess.
 */
import '../helpers/with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import { BashTerminalBackend, Config } from '@deepseek-ai/dsh-terminal-bash';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalSubprocess } from '@execworld/service/dsh';
import { asleepInForeground, sessionPids } from '../helpers/proc.ts';
import { waitFor } from '../helpers/wait.ts';

type BackendConfig = ConstructorParameters<typeof BashTerminalBackend>[1];
type BackendSpec = Parameters<BashTerminalBackend['spawn']>[0];

const root = new Context();
let backend: BashTerminalBackend;

function spec(sessionId: string): BackendSpec {
  const owner = { id: 'agent-under-test', ctx: root, session: { events: [] } };
  return { sessionId, owner, type: 'shell' } as unknown as BackendSpec;
}

beforeAll(async () => {
  await root.plugin(LocalSubprocess, {});
  root.provide('sandboxPolicy', {
    defaultMode: 'danger-full-access',
    workspaceRoot: '/tmp',
    resolve: () => ({ mode: 'danger-full-access', workspaceRoot: '/tmp' }),
  } as never);
  const config = {
    ...(Config({}) as object),
    shellDialect: 'bash',
    shellPath: '/bin/bash',
    shellArgs: ['--noprofile', '--norc', '-i'],
    disposeGraceMs: 2000,
  } as BackendConfig;
  backend = new BashTerminalBackend(root, config);
});

afterAll(async () => {
  await root.fiber.dispose();
});

describe('dsh-terminal-bash over LocalRuntime', () => {
  it('settles `echo hi` and `cat` as stdin_read, and closing leaves no process', async () => {
    const session = await backend.spawn(spec('pty-1'));
    expect(session.motd).toContain('dsh> ');
    const pid = session.pid;
    expect(sessionPids(pid)).toContain(pid);

    const echo = await session.startSend({ text: 'echo hi', submit: true }).done;
    expect(echo.waitReason).toBe('stdin_read');
    expect(echo.viewport).toContain('hi\n');

    const cat = await session.startSend({ text: 'cat', submit: true }).done;
    expect(cat.waitReason).toBe('stdin_read');

    await session.close('test done');
    expect(session.status()).toMatchObject({ kind: 'exited' });
    expect(sessionPids(pid)).toEqual([]);
  });

  it('interrupts a foreground command with a real SIGINT and keeps the shell', async () => {
    const session = await backend.spawn(spec('pty-2'));
    const controller = new AbortController();
    const operation = session.startSend({ text: 'sleep 30', submit: true, signal: controller.signal });
    // Aborted once sleep runs, not after a guess at how long typing and starting it take.
    await waitFor('sleep in the foreground', () => asleepInForeground(session.pid, 'sleep'));
    controller.abort();
    const interrupted = await operation.done;
    expect(interrupted.waitReason).toBe('stdin_read');
    const next = await session.startSend({ text: 'echo "after=$?"', submit: true }).done;
    expect(next.viewport).toContain('after=130');
    const pid = session.pid;
    await session.close('test done');
    expect(sessionPids(pid)).toEqual([]);
  });

  it('reports an exit with its code', async () => {
    const session = await backend.spawn(spec('pty-3'));
    const exited = await session.startSend({ text: 'exit 4', submit: true }).done;
    expect(exited.waitReason).toBe('session_exit');
    expect(session.status()).toEqual({ kind: 'exited', exitCode: 4, signal: null });
    await session.close('test done');
  });
});
