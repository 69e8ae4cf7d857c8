/**
 * What one trivial pwsh run costs: `run('$null')` p50 and the bytes the shell
 * writes to its terminal per run, over LocalRuntime and over a daemon, before
 * and after the command redefines `prompt`. `npx tsx bench/pwsh-runs.ts [runs]`.
 */
import '../test/helpers/with-resolvers.ts';
import { connect } from '@execworld/sdk';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { PersistentShell, pwsh } from '@execworld/sdk/shell';
import { LocalRuntime } from '@execworld/service';
import { startDaemonProcess } from './lib/daemon.ts';
import { findPwsh } from './lib/dsh-pwsh.ts';
import { fmt, percentile, printTable } from './lib/stats.ts';

const runs = Number(process.argv[2] ?? 50);
const program = findPwsh();
if (program === undefined) throw new Error('pwsh not found');
const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** `runs` × `$null`: each run's duration and the terminal bytes written from its line to its answer. */
async function measure(shell: PersistentShell): Promise<{ ms: number[]; bytes: number[] }> {
  const terminal = await shell.terminal;
  let seen = 0;
  const count = (chunk: Buffer): void => void (seen += chunk.length);
  terminal.output.on('data', count);
  const ms: number[] = [];
  const bytes: number[] = [];
  try {
    for (let index = 0; index < runs; index += 1) {
      const from = seen;
      const begun = nowMs();
      const result = await shell.run('$null');
      ms.push(nowMs() - begun);
      bytes.push(seen - from);
      if (result.exitCode !== 0) throw new Error(`$null answered ${JSON.stringify(result)}`);
    }
  } finally {
    terminal.output.off('data', count);
  }
  return { ms, bytes };
}

const daemon = await startDaemonProcess();
const rows: string[][] = [];
try {
  for (const kind of ['local', 'remote'] as const) {
    const runtime: SubprocessRuntime & { dispose(): Promise<void> } =
      kind === 'local' ? new LocalRuntime() : await connect(daemon.url, { token: daemon.token });
    const shell = await PersistentShell.start(runtime, { dialect: pwsh, shellPath: program, cwd: '/tmp', startTimeoutMs: 120_000 });
    try {
      await shell.run('$null');
      const plain = await measure(shell);
      await shell.run("function prompt { 'X> ' }");
      const prompted = await measure(shell);
      rows.push([
        kind,
        fmt(percentile(plain.ms, 50), 2),
        fmt(percentile(plain.bytes, 50), 0),
        fmt(percentile(prompted.ms, 50), 2),
        fmt(percentile(prompted.bytes, 50), 0),
      ]);
    } finally {
      await shell.close();
      await runtime.dispose();
    }
  }
} finally {
  await daemon.stop();
}
printTable(
  `persistent pwsh: ${runs} × run('$null'), then ${runs} more after function prompt { 'X> ' }`,
  ['runtime', 'p50 (ms)', 'bytes per run (p50)', 'p50 after prompt (ms)', 'bytes per run after prompt (p50)'],
  rows,
);
