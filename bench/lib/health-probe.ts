/**
 * A health probe in a process of its own, as an orchestrator's is: it asks
 * `GET /v1/health` of the daemon at `argv[2]` over one kept-alive connection
 * every `argv[3]` ms, until its parent sends it a message, and answers with
 * each round trip (when it was sent, by the wall clock, and how long it took)
 * and each failure. Probing from the benchmark's own process would count
 * that process's work (its creates and deletes) as the daemon's.
 */
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ProbeReport {
  /** [sent at, epoch ms; round trip, ms] */
  readonly samples: [number, number][];
  readonly failures: string[];
}

const url = new URL(process.argv[2]!);
const everyMs = Number(process.argv[3] ?? 25);
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function probe(): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const asked = request({ host: url.hostname, port: url.port, path: '/v1/health', agent }, (answer) => {
      answer.resume();
      answer.once('end', () => (answer.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`HTTP ${String(answer.statusCode)}`))));
    });
    asked.once('error', reject);
    asked.end();
  });
}

let probing = true;
process.once('message', () => (probing = false));
const report: ProbeReport = { samples: [], failures: [] };
// Warm: the first requests compile the route on both sides, a cost of starting, not of the sessions.
for (let index = 0; index < 20; index += 1) await probe();
process.send!('ready');
while (probing) {
  const at = Date.now();
  try {
    report.samples.push([at, await probe()]);
  } catch (error) {
    report.failures.push((error as Error).message);
  }
  await sleep(everyMs);
}
process.send!(report, () => process.exit(0));
