/**
 * What the SDK does with a call in flight when its connection drops: it sends
 * again exactly the calls the operation table calls idempotent (for a create,
 * only one carrying a requestId), and fails every other one with
 * OUTCOME_UNKNOWN, never sending it twice. The calls here are lost in a
 * stalled proxy, so the daemon never sees their first sending: whatever
 * reaches it was sent again.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, vi } from 'vitest';
import { WebSocket } from 'ws';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { FaultProxy } from '../helpers/proxy.ts';

let daemon: TestDaemon;
let proxy: FaultProxy;
let runtime: RemoteRuntime;
const test = daemonTest();

test.beforeAll(async ({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
  runtime = await connect(proxy.url, { token: ALICE, reconnectInitialDelayMs: 5, reconnectMaxDelayMs: 50 });
});
afterEach(() => {
  vi.restoreAllMocks();
});
test.afterAll(async () => {
  await runtime.dispose();
  await proxy.close();
});

/** Records every call message sent on any WebSocket of this process (the daemon's own sends are answers, never calls). */
function recordCalls(): { sent: (marker: string) => number } {
  // A spy calls through: the messages still go out.
  const send = vi.spyOn(WebSocket.prototype, 'send');
  const calls = (): string[] =>
    send.mock.calls.map(([data]) => data).filter((data): data is string => typeof data === 'string' && data.startsWith('{"t":"call"'));
  return { sent: (marker) => calls().filter((message) => message.includes(marker)).length };
}

/** Stalls the proxy, runs `start` (which sends its calls at once), then cuts every connection and lets the SDK reconnect. */
function dropInFlight<T>(start: () => T): T {
  proxy.stall();
  try {
    return start();
  } finally {
    proxy.cut();
    proxy.resume();
  }
}

const processSpec = (marker: string) => ({
  argv: ['/bin/sleep', '30'],
  cwd: '/tmp',
  env: { RESEND_MARKER: marker },
  stdio: { stdin: 'ignore' as const, stdout: 'pipe' as const, stderr: 'pipe' as const },
  graceMs: 1000,
});

describe('a call in flight when the connection drops', () => {
  test('is sent again when idempotent, and fails with OUTCOME_UNKNOWN without being sent again when not', async () => {
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
    const calls = recordCalls();
    const lost = `lost-${randomUUID()}`;
    const kept = `kept-${randomUUID()}`;
    const connection = runtime.connection;
    const [create, createWithRequestId, signal, info] = dropInFlight(() => [
      connection.call('process.create', processSpec(lost)),
      connection.call('process.create', { ...processSpec(kept), requestId: randomUUID() }),
      connection.call('terminal.signal', { id: terminal.id, signal: 'SIGINT' }),
      connection.call('terminal.get', { id: terminal.id }),
    ]);

    await expect(create).rejects.toMatchObject({
      code: 'OUTCOME_UNKNOWN',
      message: expect.stringMatching(/before the daemon answered process\.create, which is not safe to send again/),
    });
    await expect(signal).rejects.toMatchObject({ code: 'OUTCOME_UNKNOWN', message: expect.stringMatching(/terminal\.signal/) });
    const created = await createWithRequestId;
    await expect(info).resolves.toMatchObject({ id: terminal.id, status: 'running' });

    // The idempotent calls went out twice, the others once: the first sending was lost in the proxy.
    expect(calls.sent(kept)).toBe(2);
    expect(calls.sent(lost)).toBe(1);
    expect(calls.sent('"op":"terminal.signal"')).toBe(1);
    expect(calls.sent('"op":"terminal.get"')).toBe(2);
    // So the daemon runs the process that was sent again, and none for the create it never got.
    const processes = await runtime.listProcesses();
    expect(processes.filter((entry) => entry.id === created.id)).toHaveLength(1);
    expect(processes).toHaveLength(1);

    await runtime.call('process.terminate', { id: created.id });
    await terminal.terminate();
  });
});
