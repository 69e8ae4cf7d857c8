/**
 * The persistent shell's cost: `run('true')` and a 10 MB run through our
 * PersistentShell over LocalRuntime and RemoteRuntime, beside the DeepSeek
 * harness's persistent bash tool (dsh-tool-bash-persistent) over the same
 * runtimes.
 */
import '../../test/helpers/with-resolvers.ts';
import type { Context } from '@deepseek-ai/cordis';
import { connect } from '@execworld/sdk';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { PersistentShell, pwsh } from '@execworld/sdk/shell';
import { findPwsh } from './dsh-pwsh.ts';
import { LocalRuntime } from '@execworld/service';
import { LocalSubprocess } from '@execworld/service/dsh';
import { compose } from '../../test/helpers/dsh-harness.ts';
import type { DaemonProcess } from './daemon.ts';

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export interface ShellFigures {
  /** `true` round trips, ms */
  readonly trueMs: number[];
  /** One run printing 10 MB (`seq 1 1250000`), ms */
  readonly bulkMs: number;
}

/** `runs` × `true`, then one 10 MB run, through PersistentShell on a runtime. */
export async function engineFigures(kind: 'local' | 'remote', daemon: DaemonProcess, runs: number): Promise<ShellFigures> {
  const runtime: SubprocessRuntime & { dispose(): Promise<void> } = kind === 'local' ? new LocalRuntime() : await connect(daemon.url, { token: daemon.token });
  const shell = await PersistentShell.start(runtime, { cwd: '/tmp' });
  try {
    await shell.run('true');
    const trueMs: number[] = [];
    for (let index = 0; index < runs; index += 1) {
      const started = nowMs();
      const result = await shell.run('true');
      trueMs.push(nowMs() - started);
      if (result.exitCode !== 0) throw new Error(`true answered ${JSON.stringify(result)}`);
    }
    const started = nowMs();
    const bulk = await shell.run('seq 1 1250000', { maxOutputBytes: 1024 * 1024 });
    const bulkMs = nowMs() - started;
    if (bulk.exitCode !== 0 || !bulk.output.endsWith('1250000\n')) throw new Error('the 10 MB run did not complete');
    return { trueMs, bulkMs };
  } finally {
    await shell.close();
    await runtime.dispose();
  }
}

/** `runs` × `$null` through PersistentShell's pwsh dialect, and the shell's start; undefined without pwsh. */
export async function pwshFigures(kind: 'local' | 'remote', daemon: DaemonProcess, runs: number): Promise<{ nullMs: number[]; startMs: number } | undefined> {
  const program = findPwsh();
  if (program === undefined) return undefined;
  const runtime: SubprocessRuntime & { dispose(): Promise<void> } = kind === 'local' ? new LocalRuntime() : await connect(daemon.url, { token: daemon.token });
  const started = nowMs();
  const shell = await PersistentShell.start(runtime, { dialect: pwsh, shellPath: program, cwd: '/tmp', startTimeoutMs: 120_000 });
  const startMs = nowMs() - started;
  try {
    await shell.run('$null');
    const nullMs: number[] = [];
    for (let index = 0; index < runs; index += 1) {
      const begun = nowMs();
      const result = await shell.run('$null');
      nullMs.push(nowMs() - begun);
      if (result.exitCode !== 0) throw new Error(`$null answered ${JSON.stringify(result)}`);
    }
    return { nullMs, startMs };
  } finally {
    await shell.close();
    await runtime.dispose();
  }
}

/** The same through dsh-tool-bash-persistent over our plugin for the runtime. */
export async function dshToolFigures(kind: 'local' | 'remote', daemon: DaemonProcess, runs: number): Promise<ShellFigures> {
  const plugin = (root: Context): PromiseLike<unknown> =>
    kind === 'local' ? root.plugin(LocalSubprocess, {}) : root.plugin(RemoteSubprocess, { url: daemon.url, token: daemon.token });
  const harness = await compose(plugin, { toolTimeoutMs: 120_000 });
  const run = (command: string): Promise<string> => harness.bash.execute({ command }, { agent: harness.owner, signal: AbortSignal.timeout(180_000) });
  try {
    await run('true');
    const trueMs: number[] = [];
    for (let index = 0; index < runs; index += 1) {
      const started = nowMs();
      await run('true');
      trueMs.push(nowMs() - started);
    }
    const started = nowMs();
    await run('seq 1 1250000');
    return { trueMs, bulkMs: nowMs() - started };
  } finally {
    await harness.close();
  }
}
