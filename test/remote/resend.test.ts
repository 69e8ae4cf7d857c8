/**
 * What the SDK does with a call in flight when its connection drops: it sends
 * again exactly the calls the operation table calls idempotent (for a create,
 * only one carrying a requestId), and fails every other one with
 * OUTCOME_UNKNOWN, never sending it twice. The calls here are lost in a
 * stalled proxy, so the daemon never sees their first sending: whatever
 * reaches it was sent again.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, vi } from 'vitest';
import { WebSocket } from 'ws';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { FaultProxy } from '../helpers/proxy.ts';
import { waitFor } from '../helpers/wait.ts';

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

  test("a shell's run with a requestId goes on, and its resend answers it with the command's exact status", async () => {
    const go = join(mkdtempSync(join(tmpdir(), 'resend-')), 'go');
    const shell = await runtime.call('shell.create', { dialect: 'bash', cwd: '/tmp' });
    const calls = recordCalls();
    const requestId = randomUUID();
    const run = runtime.call('shell.run', {
      id: shell.id,
      command: `echo printed-before; while [ ! -e ${go} ]; do sleep 0.05; done; echo printed-after; (exit 3)`,
      requestId,
    });
    await waitFor('the command to run', async () => {
      const read = await runtime.call('terminal.output', { id: shell.terminalId!, from: 0 });
      return Buffer.from(read.data, 'base64').toString('latin1').includes('printed-before\r\n');
    });
    // The connection drops while the run's call waits: the daemon sees its caller go, the SDK sends the call again.
    proxy.cut();
    await waitFor('the call to be sent again', () => calls.sent(requestId) === 2);
    writeFileSync(go, '');
    const answer = await run;
    expect([answer.reason, answer.exitCode, answer.output]).toEqual(['completed', 3, 'printed-before\nprinted-after\n']);
    // One run, answered once: the shell's history holds it, not a second.
    const history = await runtime.call('shell.history', { id: shell.id });
    expect(history.runs.map((entry) => [entry.state, entry.exitCode])).toEqual([['completed', 3]]);
    // Asked again after its answer, the run is not started again: its answer is given.
    expect(await runtime.call('shell.run', { id: shell.id, command: 'false', requestId })).toMatchObject({ reason: 'completed', exitCode: 3 });
    await runtime.call('shell.delete', { id: shell.id });
  });
});
