/**
 * What a WebSocket client may make the daemon hold and do before a message of
 * it is handled: a message must arrive whole within --message-timeout-ms
 * (fragments answered by pongs do not keep it alive), the messages an owner's
 * connections are receiving together must fit in --message-budget-bytes, and
 * messages are read at no more than --max-message-rate per connection and
 * --max-owner-message-rate per owner, by pausing the connection's reading.
 */
import { describe, expect } from 'vitest';
import { WebSocket } from 'ws';
import { WS_SUBPROTOCOL } from '@execworld/sdk/protocol';
import { ALICE, BOB, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { metricSample } from '../helpers/metrics.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

const KiB = 1024;
const test = daemonTest();

/** The close of `socket`: its code and reason. */
function closed(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
}

function open(daemon: TestDaemon, token: string): Promise<WebSocket> {
  const socket = new WebSocket(daemon.wsUrl, [WS_SUBPROTOCOL], { headers: { authorization: `Bearer ${token}` } });
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends `text` as a message of fragments of `size` bytes, each once the last has left; the last one ends it unless `unfinished`. */
async function sendFragments(socket: WebSocket, text: string, size: number, unfinished = false): Promise<void> {
  for (let at = 0; at < text.length; at += size) {
    const fin = !unfinished && at + size >= text.length;
    await new Promise<void>((resolve, reject) => socket.send(text.slice(at, at + size), { fin }, (error) => (error ? reject(error) : resolve())));
  }
}

/** Bytes of WebSocket messages under way (its metrics). */
async function messageBytes(daemon: TestDaemon): Promise<number> {
  const answer = await fetch(`${daemon.url}/metrics`, { headers: { authorization: `Bearer ${BOB}` } });
  return metricSample(await answer.text(), 'execworld_memory_bytes', { budget: 'messages' })!;
}

/** WebSocket messages the daemon has read so far (its metrics). */
async function messagesRead(daemon: TestDaemon): Promise<number> {
  const answer = await fetch(`${daemon.url}/metrics`, { headers: { authorization: `Bearer ${BOB}` } });
  return metricSample(await answer.text(), 'execworld_websocket_messages_total')!;
}

describe('a WebSocket message under way', () => {
  test('that never ends closes its connection within --message-timeout-ms, its pongs notwithstanding; whole messages sent all along are unaffected', async ({
    startDaemon,
  }) => {
    const daemon = await startDaemon({ messageTimeoutMs: 1500, heartbeatMs: 300 });
    const stalled = await open(daemon, ALICE);
    const stalledClosed = closed(stalled);
    // The first fragments of a call, then nothing; ws answers the daemon's pings, so the connection looks alive.
    await sendFragments(stalled, `{"t":"call","id":1,"op":"health.get","params":{"pad":"${'x'.repeat(64 * KiB)}`, 16 * KiB, true);

    // Meanwhile, messages of several fragments, each ended soon after it began, for longer than the limit.
    const busy = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    let answered = 0;
    const started = Date.now();
    while (Date.now() - started < 3000) {
      const id = 100 + answered;
      await sendFragments(busy.socket, JSON.stringify({ t: 'call', id, op: 'health.get' }), 8);
      await busy.until('the answer', () => busy.messages.find((message) => message.t === 'result' && message.id === id));
      answered += 1;
      await sleep(20);
    }
    const { code, reason } = await stalledClosed;
    expect(code).toBe(1008);
    expect(reason).toBe('a message did not all arrive within 1500 ms (--message-timeout-ms)');
    expect(busy.socket.readyState).toBe(WebSocket.OPEN);
    expect(answered).toBeGreaterThan(10);
    busy.close();
  });

  test("past --message-budget-bytes over an owner's connections closes the one that would pass it; other owners are unaffected", async ({ startDaemon }) => {
    const daemon = await startDaemon({ maxFrameBytes: 1024 * KiB, messageBudgetBytes: 1024 * KiB, messageTimeoutMs: 60_000 });
    const first = await open(daemon, ALICE);
    const second = await open(daemon, ALICE);
    const bob = await open(daemon, BOB);
    const firstClosed = closed(first);
    const secondClosed = closed(second);
    await sendFragments(first, `{"t":"call","id":1,"op":"health.get","params":{"pad":"${'x'.repeat(600 * KiB)}`, 600 * KiB, true);
    await waitFor('the first message to be under way', async () => (await messageBytes(daemon)) >= 600 * KiB);
    await sendFragments(bob, `{"t":"call","id":1,"op":"health.get","params":{"pad":"${'x'.repeat(600 * KiB)}`, 600 * KiB, true);
    await sendFragments(second, `{"t":"call","id":1,"op":"health.get","params":{"pad":"${'x'.repeat(600 * KiB)}`, 600 * KiB, true);
    const { code, reason } = await secondClosed;
    expect(code).toBe(1008);
    expect(reason).toBe(`messages under way of these tokens would hold over ${1024 * KiB} bytes (--message-budget-bytes)`);
    expect(first.readyState).toBe(WebSocket.OPEN);
    expect(bob.readyState).toBe(WebSocket.OPEN);
    // The first one's bytes are given back when it goes: another connection of alice's may take as much again.
    first.terminate();
    await firstClosed;
    const third = await open(daemon, ALICE);
    const thirdClosed = closed(third);
    await sendFragments(third, `{"t":"call","id":1,"op":"health.get","params":{"pad":"${'x'.repeat(600 * KiB)}`, 600 * KiB, true);
    await sleep(200);
    expect(third.readyState).toBe(WebSocket.OPEN);
    third.terminate();
    bob.terminate();
    await thirdClosed;
  });
});

describe('a flood of small WebSocket messages', () => {
  const RATE = 200;
  const OWNER_RATE = 300;

  /** Sends acks of a subscription that does not exist on `socket` as fast as it takes them, until `stop` says so. */
  async function flood(socket: WebSocket, stop: () => boolean): Promise<number> {
    const ack = JSON.stringify({ t: 'ack', sub: 999_999, offset: 0 });
    let sent = 0;
    while (!stop() && socket.readyState === WebSocket.OPEN) {
      if (socket.bufferedAmount > 256 * KiB) {
        await sleep(5);
        continue;
      }
      for (let i = 0; i < 500; i += 1) socket.send(ack);
      sent += 500;
      await new Promise((resolve) => setImmediate(resolve));
    }
    return sent;
  }

  test("is read at no more than the connection's rate, then its owner's, while another owner is answered", async ({ startDaemon }) => {
    const daemon = await startDaemon({ maxMessageRate: RATE, maxOwnerMessageRate: OWNER_RATE });
    const bob = await TestSocket.open(daemon.wsUrl, { token: BOB });

    for (const connections of [1, 2]) {
      const sockets = await Promise.all(Array.from({ length: connections }, () => open(daemon, ALICE)));
      let stop = false;
      const floods = sockets.map((socket) => flood(socket, () => stop));
      // Past the first second's bursts, the rate alone lets messages in.
      await sleep(1200);
      const before = await messagesRead(daemon);
      const from = performance.now();
      let calls = 0;
      while (performance.now() - from < 2000) {
        // The other owner's calls are answered while the flood goes on.
        await bob.call('health.get');
        calls += 1;
        await sleep(50);
      }
      const read = (await messagesRead(daemon)) - before;
      const seconds = (performance.now() - from) / 1000;
      stop = true;
      const sent = (await Promise.all(floods)).reduce((sum, each) => sum + each, 0);
      for (const socket of sockets) socket.terminate();
      const rate = connections === 1 ? RATE : OWNER_RATE;
      // What bob sent (and his metrics scrapes, which are no messages) aside, alice's messages came in at the rate, with a burst's slack.
      expect(read - calls).toBeLessThanOrEqual(rate * seconds + rate);
      // The flood was there: far more was sent than read.
      expect(sent).toBeGreaterThan(10 * (read + rate));
    }
    bob.close();
  });
});
