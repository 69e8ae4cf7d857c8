/**
 * 5 MB of output through the DeepSeek harness's persistent bash tool
 * (dsh-tool-bash-persistent over dsh-terminal-bash), over the reference
 * provider, our local plugin and our remote plugin; and how many chunks a
 * terminal's output reaches its consumer in, which the harness pays for one
 * by one.
 */
import '../../test/helpers/with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import ReferenceSubprocess from '@deepseek-ai/dsh-subprocess-local';
import { TerminalSessionService } from '@deepseek-ai/dsh-terminal';
import * as terminalBash from '@deepseek-ai/dsh-terminal-bash';
import * as toolBashPersistent from '@deepseek-ai/dsh-tool-bash-persistent';
import { connect } from '@execworld/sdk';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { LocalSubprocess } from '@execworld/service/dsh';
import type { DaemonProcess } from './daemon.ts';

export type BulkProvider = 'reference' | 'local' | 'remote';

/** `seq 1 660000` prints 4,934,001 bytes: about 5 MB. */
export const BULK_COMMAND = 'seq 1 660000 | tail -c 40';
const BULK_PRINT = 'seq 1 660000';

interface Tool {
  execute(args: { command: string }, exec: { agent: unknown; signal: AbortSignal }): Promise<string>;
}

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/**
 * Milliseconds the persistent bash tool takes to run a command printing ~5 MB,
 * after a warm-up command, and whether what it returned is from the command's
 * end (the tool clips its answer to the last lines; an answer cut short ends
 * earlier).
 */
export async function dshBulkMs(provider: BulkProvider, daemon: DaemonProcess): Promise<{ ms: number; complete: boolean }> {
  const root = new Context();
  const owner = { id: 'bench', ctx: root, session: { header: { cwd: '/tmp' }, events: [] as unknown[] } };
  const tools = new Map<string, Tool>();
  root.provide('agents', { get: (id: string) => (id === owner.id ? owner : undefined) } as never);
  root.provide('sandboxPolicy', { defaultMode: 'danger-full-access', workspaceRoot: '/tmp', resolve: () => ({ mode: 'danger-full-access', workspaceRoot: '/tmp' }) } as never);
  root.provide('tools', { register: (tool: Tool & { name: string }) => (tools.set(tool.name, tool), () => tools.delete(tool.name)) } as never);
  if (provider === 'reference') await root.plugin(ReferenceSubprocess);
  else if (provider === 'local') await root.plugin(LocalSubprocess, {});
  else await root.plugin(RemoteSubprocess, { url: daemon.url, token: daemon.token });
  await root.plugin(TerminalSessionService);
  await root.plugin(terminalBash, { shellPath: '/bin/bash', disposeGraceMs: 1000, idleSilenceMs: 3000 });
  await root.plugin(toolBashPersistent, { timeoutMs: 120_000 });
  const bash = tools.get('bash')!;
  const run = (command: string): Promise<string> => bash.execute({ command }, { agent: owner, signal: AbortSignal.timeout(180_000) });
  try {
    await run('echo warm');
    const started = nowMs();
    const output = await run(BULK_PRINT);
    const elapsed = nowMs() - started;
    return { ms: elapsed, complete: /\n6599\d\d\n/.test(output) };
  } finally {
    await root.fiber.dispose();
  }
}

/** How many chunks ~5 MB of terminal output reaches a consumer in, for a runtime. */
export async function outputChunks(runtime: SubprocessRuntime): Promise<{ chunks: number; bytes: number }> {
  const terminal = await runtime.spawnTerminal({ argv: ['/bin/sh', '-c', BULK_PRINT], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
  let chunks = 0;
  let bytes = 0;
  terminal.output.on('data', (chunk: Buffer) => {
    chunks += 1;
    bytes += chunk.length;
  });
  await terminal.done;
  await terminal.terminate();
  return { chunks, bytes };
}

/** The chunk counts of the three runtimes. */
export async function chunkCounts(daemon: DaemonProcess): Promise<Record<BulkProvider, { chunks: number; bytes: number }>> {
  const local = new LocalRuntime();
  const remote = await connect(daemon.url, { token: daemon.token });
  const root = new Context();
  await root.plugin(ReferenceSubprocess);
  try {
    return {
      reference: await outputChunks((root as unknown as { subprocess: SubprocessRuntime }).subprocess),
      local: await outputChunks(local),
      remote: await outputChunks(remote),
    };
  } finally {
    await local.dispose();
    await remote.dispose();
    await root.fiber.dispose();
  }
}
