/**
 * The benchmark's side of the health probe (bench/lib/health-probe.ts): it
 * starts the probe against a daemon, and once the probe is warm, its samples
 * are taken between two wall-clock instants.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ProbeReport } from './health-probe.ts';

export interface HealthProbe {
  /** Stops the probe and answers what it measured. */
  stop(): Promise<ProbeReport>;
  /** Ends the probe where a workload failed. */
  kill(): void;
}

/** A probe asking `url`'s health every `everyMs`, warm once this resolves. */
export async function startHealthProbe(url: string, everyMs: number): Promise<HealthProbe> {
  const child: ChildProcess = fork(fileURLToPath(new URL('./health-probe.ts', import.meta.url)), [url, String(everyMs)]);
  const report = new Promise<ProbeReport>((resolve, reject) => {
    child.on('message', (message) => {
      if (message !== 'ready') resolve(message as ProbeReport);
    });
    child.once('exit', (code) => reject(new Error(`the health probe exited (${String(code)}) before it reported`)));
  });
  report.catch(() => undefined);
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', () => reject(new Error('the health probe exited before it was warm')));
  });
  return {
    stop: () => {
      child.send('stop');
      return report;
    },
    kill: () => child.kill(),
  };
}

/** The round trips of the samples sent from `from` to `to` (epoch ms). */
export function samplesBetween(report: ProbeReport, from: number, to = Number.POSITIVE_INFINITY): number[] {
  return report.samples.filter(([at]) => at >= from && at <= to).map(([, ms]) => ms);
}
