/**
 * The scale workload: one fresh daemon per size, `count` idle sessions (`sh`
 * terminals, or `sleep` processes) created one after another over REST, left
 * to run a few seconds, then every session ended at once; the daemon's health
 * asked the whole time by a probe in a process of its own, and told apart
 * while the sessions are made, while they run, and while they are ended.
 * A create should cost the same with 10 or 1,000 sessions, and ending them
 * all should be parallel work.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDaemonProcess } from './daemon.ts';
import { samplesBetween, startHealthProbe, type HealthProbe } from './probe.ts';
import { percentile } from './stats.ts';

/** What the sessions are: idle `sh` terminals, or `sleep` processes (each its own process group and cell). */
export type ScaleKind = 'terminal' | 'process';

export interface ScaleOptions {
  readonly kind?: ScaleKind;
  /** Node's arguments for the daemon (a profiler, a preload). */
  readonly nodeArgs?: string[];
}

export interface ScaleFigures {
  readonly kind: ScaleKind;
  readonly sessions: number;
  /** One create's round trip, ms, over all `sessions` creates. */
  readonly createP50Ms: number;
  readonly createP99Ms: number;
  /** The creates of the last tenth: where a per-session cost shows. */
  readonly lastTenthP50Ms: number;
  /** From the first DELETE sent to the last answered, {@link TERMINATE_IN_FLIGHT} in flight at a time, ms. */
  readonly terminateAllMs: number;
  /** Daemon RSS growth per idle session, KiB. */
  readonly rssPerSessionKiB: number;
  /** GET /v1/health round trips, asked by a probe of its own (bench/lib/health-probe.ts), while the sessions were made and ended. */
  readonly healthP50Ms: number;
  readonly healthP99Ms: number;
  /** The same, while the sessions were made. */
  readonly healthCreatingP50Ms: number;
  readonly healthCreatingP99Ms: number;
  /** The same, while all of them ran (idle, for {@link RUNNING_MS}), between the last create and the first terminate. */
  readonly healthRunningP50Ms: number;
  readonly healthRunningP99Ms: number;
  /** The same, while they were ended. */
  readonly healthEndingP50Ms: number;
  readonly healthEndingP99Ms: number;
  readonly healthSamples: number;
  /** Health requests that failed, and how. */
  readonly healthFailures: readonly string[];
}

/** DELETE requests in flight together while every session is ended. */
export const TERMINATE_IN_FLIGHT = 64;
/** Health is asked every `HEALTH_EVERY_MS` from the first create to the last terminate. */
const HEALTH_EVERY_MS = 25;
/** How long every session runs, idle, before they are ended: the health asked meanwhile is the daemon's with them all running. */
export const RUNNING_MS = 4000;

const CREATES: Record<ScaleKind, { path: string; body: unknown }> = {
  terminal: { path: '/v1/terminals', body: { argv: ['/bin/sh'], cwd: '/tmp', env: { PATH: '/usr/bin:/bin', PS1: '$ ' }, rows: 24, cols: 80 } },
  process: { path: '/v1/processes', body: { argv: ['/bin/sleep', '3600'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } } },
};

export async function scale(count: number, options: ScaleOptions = {}): Promise<ScaleFigures> {
  const kind = options.kind ?? 'terminal';
  const create = CREATES[kind];
  const daemon = await startDaemonProcess(['--max-sessions', String(Math.max(count, 256))], options.nodeArgs);
  const headers = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const response = await fetch(`${daemon.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await response.text();
    return { status: response.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
  };
  let probe: HealthProbe | undefined;
  try {
    await sleep(200);
    const baseline = daemon.rssKiB();
    probe = await startHealthProbe(daemon.url, HEALTH_EVERY_MS);
    const creatingFrom = Date.now();
    const creates: number[] = [];
    const ids: string[] = [];
    for (let index = 0; index < count; index += 1) {
      const started = performance.now();
      const answer = await call('POST', create.path, create.body);
      creates.push(performance.now() - started);
      if (answer.status !== 201 && answer.status !== 200)
        throw new Error(`create ${String(index)} answered ${String(answer.status)}: ${JSON.stringify(answer.json)}`);
      ids.push(answer.json.id as string);
    }
    const creatingTo = Date.now();
    // Settled first: the last creates' answers and logs are not the running sessions' cost.
    await sleep(500);
    const runningFrom = Date.now();
    await sleep(RUNNING_MS);
    const runningTo = Date.now();
    const rss = daemon.rssKiB();
    const endingFrom = Date.now();
    const started = performance.now();
    // All at once, as many clients would: TERMINATE_IN_FLIGHT requests open at a time (a thousand sockets opened
    // in the same instant overflow the listen backlog and are reset, which measures the kernel, not the daemon).
    const ended: { status: number; json: Record<string, unknown> }[] = [];
    const queue = [...ids];
    await Promise.all(
      Array.from({ length: Math.min(TERMINATE_IN_FLIGHT, ids.length) }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) ended.push(await call('DELETE', `${create.path}/${id}`));
      }),
    );
    const terminateAllMs = performance.now() - started;
    const failed = ended.filter((answer) => answer.status >= 300);
    if (failed.length > 0) throw new Error(`${String(failed.length)} terminates failed, first: ${JSON.stringify(failed[0]!.json)}`);
    const report = await probe.stop();
    const healthFailures = report.failures;
    const health = samplesBetween(report, creatingFrom);
    const healthCreating = samplesBetween(report, creatingFrom, creatingTo);
    const healthRunning = samplesBetween(report, runningFrom, runningTo);
    const healthEnding = samplesBetween(report, endingFrom);
    return {
      kind,
      sessions: count,
      createP50Ms: percentile(creates, 50),
      createP99Ms: percentile(creates, 99),
      lastTenthP50Ms: percentile(creates.slice(Math.floor(count * 0.9)), 50),
      terminateAllMs,
      rssPerSessionKiB: (rss - baseline) / count,
      healthP50Ms: percentile(health, 50),
      healthP99Ms: percentile(health, 99),
      healthCreatingP50Ms: percentile(healthCreating, 50),
      healthCreatingP99Ms: percentile(healthCreating, 99),
      healthRunningP50Ms: percentile(healthRunning, 50),
      healthRunningP99Ms: percentile(healthRunning, 99),
      healthEndingP50Ms: percentile(healthEnding, 50),
      healthEndingP99Ms: percentile(healthEnding, 99),
      healthSamples: health.length,
      healthFailures,
    };
  } finally {
    probe?.kill();
    await daemon.stop();
  }
}
