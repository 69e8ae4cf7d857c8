/**
 * What terminal screens cost: B2 bulk through the daemon with no emulator,
 * with the default query scanner, and with the emulator fed every byte; and
 * how long a screen snapshot takes on an idle terminal and during bulk output.
 */
import { connect, type RemoteRuntime, type RemoteTerminal } from '@execworld/sdk';
import type { DaemonProcess } from './daemon.ts';
import { BENCH_ENV, CLOSE_GRACE_MS, seamSession, type TerminalPeer } from './peers.ts';
import { percentile } from './stats.ts';

/** The three ways a terminal's output passes the daemon, as peers of the bulk workload. */
export const SCREEN_MODES = {
  /** answerQueries: false and no screen asked: nothing looks at the output. */
  'no emulator': { answerQueries: false, screen: false },
  /** The default: the daemon answers queries, so a scanner looks for them; no query comes, no emulator starts. */
  'query scanner (default)': { answerQueries: true, screen: false },
  /** A screen asked as the program starts: the emulator parses every byte. */
  'emulator fed': { answerQueries: true, screen: true },
} as const;
export type ScreenMode = keyof typeof SCREEN_MODES;

function spec(argv: readonly string[], env?: Record<string, string>) {
  return { argv, cwd: '/tmp', env: { ...BENCH_ENV, ...env }, rows: 24, cols: 80, graceMs: CLOSE_GRACE_MS };
}

/** One peer per mode, over one SDK connection. */
export async function screenPeers(daemon: DaemonProcess): Promise<{ peers: TerminalPeer[]; runtime: RemoteRuntime }> {
  const runtime = await connect(daemon.url, { token: daemon.token });
  const peers = (Object.keys(SCREEN_MODES) as ScreenMode[]).map((name): TerminalPeer => ({
    name,
    closeIsQuiescence: true,
    async open(argv, env) {
      const mode = SCREEN_MODES[name];
      const terminal = await runtime.spawnTerminal(spec(argv, env), { answerQueries: mode.answerQueries });
      if (mode.screen) await terminal.screen();
      return seamSession(terminal);
    },
    dispose: () => Promise.resolve(),
  }));
  return { peers, runtime };
}

const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

async function waitForText(terminal: RemoteTerminal, text: string, timeoutMs = 20_000): Promise<void> {
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${JSON.stringify(text)} within ${timeoutMs} ms`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      seen = (seen + chunk.toString('latin1')).slice(-4096);
      if (seen.includes(text)) {
        clearTimeout(timer);
        terminal.output.off('data', onData);
        resolve();
      }
    };
    terminal.output.on('data', onData);
  });
}

/**
 * Screen round trips through the SDK, ms: `calls` in a row on a terminal
 * that drew a screenful and waits (idle), or as many as fit while it prints
 * `bulkInput` bytes base64-encoded (busy; each waits for the emulator to
 * parse what came before it). The first call, which starts the emulator, is left out.
 */
export async function snapshotLatency(
  runtime: RemoteRuntime,
  mode: 'idle' | 'busy',
  calls: number,
  bulkInput: number,
): Promise<{ p50: number; p99: number; count: number }> {
  const script =
    mode === 'idle' ? 'seq 1 40; printf READY; exec sleep 600' : `printf READY; head -c ${bulkInput} /dev/zero | base64; printf DONE; exec sleep 600`;
  const terminal = await runtime.spawnTerminal(spec(['/bin/sh', '-c', script]));
  try {
    const ready = waitForText(terminal, mode === 'idle' ? 'READY' : 'DONE', 120_000);
    let finished = mode === 'idle';
    if (mode === 'idle') await ready;
    else void ready.then(() => (finished = true));
    await terminal.screen();
    const samples: number[] = [];
    while (mode === 'idle' ? samples.length < calls : !finished) {
      const started = nowMs();
      await terminal.screen();
      samples.push(nowMs() - started);
    }
    await ready;
    return { p50: percentile(samples, 50), p99: percentile(samples, 99), count: samples.length };
  } finally {
    await terminal.terminate();
  }
}
