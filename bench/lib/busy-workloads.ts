/**
 * The daemon's responsiveness while one of its terminals streams in bulk:
 * `GET /v1/health` asked by a probe in a process of its own, first while the
 * daemon idles, then while a terminal writes base64 as fast as it can to an
 * SDK reader. A daemon whose event loop waits on a busy terminal answers
 * everyone else late.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from '@execworld/sdk';
import type { DaemonProcess } from './daemon.ts';
import { samplesBetween, startHealthProbe } from './probe.ts';
import { percentile } from './stats.ts';

export interface BusyFigures {
  readonly idleP50Ms: number;
  readonly idleP99Ms: number;
  readonly bulkP50Ms: number;
  readonly bulkP99Ms: number;
  /** The stream's rate as the reader saw it. */
  readonly mbps: number;
}

/** Health is asked every this many ms. */
const PROBE_EVERY_MS = 10;
/** How long the idle daemon is probed. */
const IDLE_MS = 1500;

/** Health beside one terminal streaming `bytes` of input as base64. */
export async function healthBesideBulk(daemon: DaemonProcess, bytes: number): Promise<BusyFigures> {
  const runtime = await connect(daemon.url, { token: daemon.token });
  const probe = await startHealthProbe(daemon.url, PROBE_EVERY_MS);
  try {
    const idleFrom = Date.now();
    await sleep(IDLE_MS);
    const bulkFrom = Date.now();
    const terminal = await runtime.spawnTerminal({
      argv: ['/bin/sh', '-c', `head -c ${String(bytes)} /dev/zero | base64`],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 500,
    });
    let received = 0;
    terminal.output.on('data', (chunk: Buffer) => (received += chunk.length));
    await terminal.done;
    const bulkTo = Date.now();
    const report = await probe.stop();
    const idle = samplesBetween(report, idleFrom, bulkFrom);
    const bulk = samplesBetween(report, bulkFrom, bulkTo);
    return {
      idleP50Ms: percentile(idle, 50),
      idleP99Ms: percentile(idle, 99),
      bulkP50Ms: percentile(bulk, 50),
      bulkP99Ms: percentile(bulk, 99),
      mbps: received / 1e6 / ((bulkTo - bulkFrom) / 1000),
    };
  } finally {
    probe.kill();
    await runtime.dispose();
  }
}
