/**
 * How long after `seq 1 300 | less` is typed (TERM=dumb) its wait for input is
 * first proven, in process (LocalRuntime) and through the SDK to the daemon in
 * a child process. A figure to print, not a test: a loaded machine only makes
 * it larger.
 *
 *   npx tsx bench/pager-latency.ts [--runs 20]
 */
import { parseArgs } from 'node:util';
import { connect } from '@execworld/sdk';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { openBash, waitForForeground } from '../test/helpers/terminal.ts';
import { startDaemonProcess } from './lib/daemon.ts';
import { fmt, median, percentile } from './lib/stats.ts';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '20' } } });
const runs = Number(args.runs);

/** Milliseconds from writing the command to the first proven wait of less, one per run, in one shell. */
async function measure(runtime: SubprocessRuntime): Promise<number[]> {
  const shell = await openBash(runtime, { env: { TERM: 'dumb', LESS: '' } });
  const shellGroup = shell.terminal.pid;
  const figures: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    await waitForForeground(shell.terminal, 'the prompt', (f) => f?.processGroupId === shellGroup && f.inputWaiting);
    const started = performance.now();
    await shell.terminal.write('seq 1 300 | less\r');
    // Polled back to back, so the figure is when the proof became available, not a polling period.
    for (;;) {
      const facts = await shell.terminal.inspectForeground();
      if (facts !== undefined && facts.processGroupId !== shellGroup && facts.inputWaiting) break;
      if (performance.now() - started > 60_000) throw new Error(`run ${run}: less never proven waiting`);
    }
    figures.push(performance.now() - started);
    await shell.terminal.write('q');
  }
  await shell.terminal.terminate();
  return figures;
}

const describe = (figures: number[]): string =>
  `median ${fmt(median(figures), 1)} ms, p90 ${fmt(percentile(figures, 90), 1)} ms, max ${fmt(Math.max(...figures), 1)} ms, min ${fmt(Math.min(...figures), 1)} ms (${figures.length} runs)`;

const local = new LocalRuntime();
try {
  console.log(`local:  ${describe(await measure(local))}`);
} finally {
  await local.dispose();
}

const daemon = await startDaemonProcess();
try {
  const remote = await connect(daemon.url, { token: daemon.token });
  try {
    console.log(`remote: ${describe(await measure(remote))}`);
  } finally {
    await remote.dispose();
  }
} finally {
  await daemon.stop();
}
