/**
 * The DeepSeek harness's persistent pwsh tool (dsh-tool-pwsh-persistent over
 * dsh-terminal-bash in its pwsh dialect) over the reference provider, our
 * local plugin and our remote plugin, with pwsh's cursor requests answered in
 * front of each (test/helpers/terminal-replies.ts says why): how long the
 * first call takes, which starts the shell, and how long each later `$null`
 * call takes.
 */
import '../../test/helpers/with-resolvers.ts';
import type { Context } from '@deepseek-ai/cordis';
import ReferenceSubprocess from '@deepseek-ai/dsh-subprocess-local';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import { LocalSubprocess } from '@execworld/service/dsh';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { composePwsh } from '../../test/helpers/dsh-harness.ts';
import { findTool } from '../../test/helpers/tools.ts';
import type { DaemonProcess } from './daemon.ts';

export type PwshProvider = 'reference' | 'local' | 'remote';

/** pwsh on PATH or where `dotnet tool install --global PowerShell` puts it; undefined when neither has it. */
export const findPwsh = (): string | undefined => findTool('pwsh', [join(homedir(), '.dotnet', 'tools', 'pwsh')]);

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export interface PwshFigures {
  /** The first tool call, `$null`: the shell's spawn, the backend's start-up, the tool's initialization and the call (ms). */
  firstCallMs: number;
  /** Each later `$null` call (ms). */
  callMs: number[];
}

export async function dshPwsh(provider: PwshProvider, daemon: DaemonProcess, pwshPath: string, calls: number): Promise<PwshFigures> {
  const plugin = (root: Context): PromiseLike<unknown> => {
    if (provider === 'reference') return root.plugin(ReferenceSubprocess);
    if (provider === 'local') return root.plugin(LocalSubprocess, {});
    return root.plugin(RemoteSubprocess, { url: daemon.url, token: daemon.token });
  };
  // Over the daemon the stack runs as published: the daemon answers pwsh's cursor requests.
  const harness = await composePwsh(plugin, { pwshPath, toolTimeoutMs: 60_000, answerCursorRequests: provider !== 'remote' });
  const run = async (): Promise<number> => {
    const started = nowMs();
    const output = await harness.pwsh.execute({ command: '$null' }, { agent: harness.owner, signal: AbortSignal.timeout(90_000) });
    if (output !== '') throw new Error(`$null returned ${JSON.stringify(output.slice(0, 200))}`);
    return nowMs() - started;
  };
  try {
    const firstCallMs = await run();
    const callMs: number[] = [];
    for (let index = 0; index < calls; index += 1) callMs.push(await run());
    return { firstCallMs, callMs };
  } finally {
    await harness.close();
  }
}
