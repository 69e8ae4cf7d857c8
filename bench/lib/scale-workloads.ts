/**
 * The scale workload: one fresh daemon per size, `count` idle `sh` terminals
 * created one after another over REST, the daemon's health answered the whole
 * time, then every terminal ended at once. A create should cost the same with
 * 10 or 1,000 sessions, and ending them all should be parallel work.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDaemonProcess } from './daemon.ts';
import { percentile } from './stats.ts';

export interface ScaleFigures {
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
  /** GET /v1/health round trips while the sessions were made and ended. */
  readonly healthP99Ms: number;
  readonly healthSamples: number;
  /** Health requests that failed, and how. */
  readonly healthFailures: readonly string[];
}

/** DELETE requests in flight together while every session is ended. */
export const TERMINATE_IN_FLIGHT = 64;
/** Health is asked every `HEALTH_EVERY_MS` from the first create to the last terminate. */
const HEALTH_EVERY_MS = 25;

export async function scale(count: number): Promise<ScaleFigures> {
  const daemon = await startDaemonProcess(['--max-sessions', String(Math.max(count, 256))]);
  const headers = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const response = await fetch(`${daemon.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await response.text();
    return { status: response.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
  };
  try {
    await sleep(200);
    const baseline = daemon.rssKiB();
    const health: number[] = [];
    const healthFailures: string[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const started = performance.now();
        try {
          const answer = await fetch(`${daemon.url}/v1/health`);
          await answer.arrayBuffer();
          if (answer.ok) health.push(performance.now() - started);
          else healthFailures.push(`HTTP ${String(answer.status)}`);
        } catch (error) {
          // A kept-alive socket the server closed just as it was reused resets: counted, not fatal.
          healthFailures.push(String((error as Error & { cause?: Error }).cause?.message ?? error));
        }
        await sleep(HEALTH_EVERY_MS);
      }
    })();
    const creates: number[] = [];
    const ids: string[] = [];
    for (let index = 0; index < count; index += 1) {
      const started = performance.now();
      const answer = await call('POST', '/v1/terminals', { argv: ['/bin/sh'], cwd: '/tmp', env: { PATH: '/usr/bin:/bin', PS1: '$ ' }, rows: 24, cols: 80 });
      creates.push(performance.now() - started);
      if (answer.status !== 201 && answer.status !== 200)
        throw new Error(`create ${String(index)} answered ${String(answer.status)}: ${JSON.stringify(answer.json)}`);
      ids.push(answer.json.id as string);
    }
    await sleep(500);
    const rss = daemon.rssKiB();
    const started = performance.now();
    // All at once, as many clients would: TERMINATE_IN_FLIGHT requests open at a time (a thousand sockets opened
    // in the same instant overflow the listen backlog and are reset, which measures the kernel, not the daemon).
    const ended: { status: number; json: Record<string, unknown> }[] = [];
    const queue = [...ids];
    await Promise.all(
      Array.from({ length: Math.min(TERMINATE_IN_FLIGHT, ids.length) }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) ended.push(await call('DELETE', `/v1/terminals/${id}`));
      }),
    );
    const terminateAllMs = performance.now() - started;
    const failed = ended.filter((answer) => answer.status >= 300);
    if (failed.length > 0) throw new Error(`${String(failed.length)} terminates failed, first: ${JSON.stringify(failed[0]!.json)}`);
    sampling = false;
    await sampler;
    return {
      sessions: count,
      createP50Ms: percentile(creates, 50),
      createP99Ms: percentile(creates, 99),
      lastTenthP50Ms: percentile(creates.slice(Math.floor(count * 0.9)), 50),
      terminateAllMs,
      rssPerSessionKiB: (rss - baseline) / count,
      healthP99Ms: percentile(health, 99),
      healthSamples: health.length,
      healthFailures,
    };
  } finally {
    await daemon.stop();
  }
}
