/**
 * The browser's channel (a DOM-shaped WebSocket, here the `ws` package's,
 * which has the DOM's interface) under the protocol client and the redial
 * loop, against a real daemon through a proxy that cuts every connection:
 * the token travels in the subprotocol, a terminal's output resumes
 * byte-exact on the next channel, a read in flight is answered there, and
 * a refused token fails the dial.
 */
import { tmpdir } from 'node:os';
import { afterAll, describe, expect } from 'vitest';
import { WebSocket } from 'ws';
import { dialBrowser, ProtocolClient, Redialer, type DomWebSocketConstructor } from '@execworld/sdk/client';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { FaultProxy } from '../helpers/proxy.ts';
import { waitFor } from '../helpers/wait.ts';

// ws's constructor is overloaded beyond the DOM's (it also takes options); its instances are what the channel uses.
const DomWebSocket = WebSocket as unknown as DomWebSocketConstructor;

const test = daemonTest();
let daemon: TestDaemon;
let proxy: FaultProxy;
test.beforeAll(async ({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
});
afterAll(async () => {
  await proxy?.close();
});

describe('the browser channel', () => {
  test('carries the protocol client through cut connections: output resumes byte-exact and a read in flight is answered', async () => {
    const client = new ProtocolClient({ requestTimeoutMs: 30_000, windowBytes: 64 * 1024 });
    let opened = 0;
    const redialer = new Redialer(
      client,
      () => dialBrowser({ url: proxy.url, token: ALICE, WebSocket: DomWebSocket }),
      { target: proxy.url, initialDelayMs: 5, maxDelayMs: 50, deadlineMs: 30_000 },
      { onOpen: () => (opened += 1) },
    );
    redialer.start();
    await client.whenOpen();
    const terminal = await client.call('terminal.create', {
      argv: ['/bin/sh', '-c', 'read go; i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done; read end'],
      cwd: tmpdir(),
      rows: 24,
      cols: 80,
      graceMs: 1000,
    });
    const chunks: Uint8Array[] = [];
    const subscription = client.subscribe({ kind: 'terminal', id: terminal.id, stream: 'output' }, 0, {
      onData: (chunk, offset) => {
        chunks.push(chunk.slice());
        subscription.ack(offset + chunk.length);
      },
      onGap: (from, to) => chunks.push(new TextEncoder().encode(`<gap ${from}-${to}>`)),
      onEnd: () => undefined,
      onError: (error) => chunks.push(new TextEncoder().encode(`<error ${error.code}>`)),
    });
    const text = (): string => Buffer.concat(chunks).toString('latin1');
    await client.call('terminal.input', { id: terminal.id, data: 'go\r', writer: 'w', seq: 1 });
    // Cut mid-stream, twice, with a read in flight the second time.
    await waitFor('the first lines', () => text().includes('line-100\r\n'));
    proxy.cut();
    await waitFor('a second channel', () => opened >= 2 && client.connected);
    proxy.stall();
    const read = client.call('terminal.get', { id: terminal.id });
    proxy.cut();
    proxy.resume();
    await expect(read).resolves.toMatchObject({ id: terminal.id });
    await waitFor('the last line', () => text().includes('line-2999\r\n'), 30_000);
    // Every line once, in order, no gap: the output resumed from the byte after the last one delivered.
    const lines = text().match(/line-\d+/g)!;
    expect(lines).toEqual(Array.from({ length: 3000 }, (_, i) => `line-${i}`));
    expect(text()).not.toContain('<');
    console.log(`3000 lines through ${opened} channels`);
    await client.call('terminal.terminate', { id: terminal.id });
    redialer.stop();
    client.close();
  });

  test('fails a dial with CONNECTION_FAILED when the daemon refuses the token', async () => {
    await expect(dialBrowser({ url: daemon.url, token: 'not-a-token-of-anyone-000', WebSocket: DomWebSocket })).rejects.toMatchObject({
      name: 'ConnectionError',
      code: 'CONNECTION_FAILED',
      message: expect.stringMatching(/\/v1\/connect closed before it opened/),
    });
  });
});
