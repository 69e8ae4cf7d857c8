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
import { connect } from '@execworld/sdk';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { LocalSubprocess } from '@execworld/service/dsh';
import { compose } from '../../test/helpers/dsh-harness.ts';
import type { DaemonProcess } from './daemon.ts';

export type BulkProvider = 'reference' | 'local' | 'remote';

/** Prints 4,508,895 bytes (5,168,895 with the terminal's CRLF): about 5 MB. */
const BULK_PRINT = 'seq 1 660000';

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/**
 * Milliseconds the persistent bash tool takes to run a command printing ~5 MB,
 * after a warm-up command; whether the shell answers the next command at once
 * (the bulk command ran to its end and the tool is in step with the shell);
 * and the first line of what the tool returned (it clips its answer to a
 * window of the scrollback, so this says how far the stream had got).
 */
export async function dshBulkMs(provider: BulkProvider, daemon: DaemonProcess): Promise<{ ms: number; complete: boolean; firstLine: number }> {
  const plugin = (root: Context): PromiseLike<unknown> => {
    if (provider === 'reference') return root.plugin(ReferenceSubprocess);
    if (provider === 'local') return root.plugin(LocalSubprocess, {});
    return root.plugin(RemoteSubprocess, { url: daemon.url, token: daemon.token });
  };
  const harness = await compose(plugin, { toolTimeoutMs: 120_000 });
  const run = (command: string): Promise<string> => harness.bash.execute({ command }, { agent: harness.owner, signal: AbortSignal.timeout(180_000) });
  try {
    await run('echo warm');
    const started = nowMs();
    const output = await run(BULK_PRINT);
    const elapsed = nowMs() - started;
    const next = await run('echo next');
    return { ms: elapsed, complete: next === 'next', firstLine: Number(/\n(\d+)\n/.exec(output)?.[1] ?? Number.NaN) };
  } finally {
    await harness.close();
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
