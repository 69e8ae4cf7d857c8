/**
 * The DeepSeek harness's own path: dsh-terminal-bash over our ctx.subprocess
 * plugins, local and remote. `echo hi` is sent and awaited as the harness
 * does (readiness polling included), then the session is closed.
 */
import '../../test/helpers/with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import { BashTerminalBackend, Config } from '@deepseek-ai/dsh-terminal-bash';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import { LocalSubprocess } from '@execworld/service/dsh';
import type { DaemonProcess } from './daemon.ts';
import { median } from './stats.ts';

type BackendSpec = Parameters<BashTerminalBackend['spawn']>[0];

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export interface DshFigures {
  /** spawn to the first prompt (start-up readiness), ms */
  startMs: number;
  /** `echo hi` send to its stdin_read settlement, ms (median of sends) */
  sendMs: number;
  /** close to quiescence, ms */
  closeMs: number;
}

export async function dshEcho(kind: 'local' | 'remote', daemon: DaemonProcess, sends = 10): Promise<DshFigures> {
  const root = new Context();
  if (kind === 'local') await root.plugin(LocalSubprocess, {});
  else await root.plugin(RemoteSubprocess, { url: daemon.url, token: daemon.token });
  root.provide('sandboxPolicy', {
    defaultMode: 'danger-full-access',
    workspaceRoot: '/tmp',
    resolve: () => ({ mode: 'danger-full-access', workspaceRoot: '/tmp' }),
  } as never);
  const backend = new BashTerminalBackend(root, {
    ...(Config({}) as object),
    shellDialect: 'bash',
    shellPath: '/bin/bash',
    shellArgs: ['--noprofile', '--norc', '-i'],
    disposeGraceMs: 3000,
  } as ConstructorParameters<typeof BashTerminalBackend>[1]);
  const owner = { id: 'bench', ctx: root, session: { events: [] } };
  const started = nowMs();
  const session = await backend.spawn({ sessionId: 'pty-bench', owner, type: 'shell' } as unknown as BackendSpec);
  const startMs = nowMs() - started;
  const samples: number[] = [];
  for (let index = 0; index < sends; index += 1) {
    const sent = nowMs();
    const result = await session.startSend({ text: 'echo hi', submit: true }).done;
    if (result.waitReason !== 'stdin_read') throw new Error(`echo hi settled as ${result.waitReason}`);
    samples.push(nowMs() - sent);
  }
  const closing = nowMs();
  await session.close('bench');
  const closeMs = nowMs() - closing;
  await root.fiber.dispose();
  return { startMs, sendMs: median(samples), closeMs };
}
