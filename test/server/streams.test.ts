import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { describe, expect } from 'vitest';
import { RingStream } from '../../service/src/server/streams.ts';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

// The file's daemon, of the WebSocket streams: a ring that holds all of their output.
const test = daemonTest({ ringBytes: 8 * 1024 * 1024 });

describe('RingStream', () => {
  const bytes = (text: string): Buffer => Buffer.from(text);

  test('reads by absolute offset without consuming', () => {
    const ring = new RingStream(100);
    ring.append(bytes('hello '));
    ring.append(bytes('world'));
    expect(ring.read(0, 100)).toMatchObject({ from: 0, next: 11, gap: null });
    expect(ring.read(6, 100).data.toString()).toBe('world');
    expect(ring.read(3, 4).data.toString()).toBe('lo w');
    expect(ring.read(11, 100)).toMatchObject({ from: 11, next: 11, gap: null });
    expect(() => ring.read(12, 1)).toThrow(/past the end/);
  });

  test('never evicts unread bytes: it reports full instead', () => {
    const ring = new RingStream(10);
    ring.append(bytes('0123456789'));
    expect(ring.full).toBe(true);
    ring.append(bytes('abc'));
    expect(ring.retained).toBe(13);
    expect(ring.read(0, 100).data.toString()).toBe('0123456789abc');
    ring.consumed(5);
    expect(ring.full).toBe(false);
    expect(ring.start).toBe(3);
    expect(ring.read(0, 100)).toMatchObject({ from: 3, gap: { from: 0, to: 3 } });
  });

  test('keeps read bytes for replay until newer bytes need the room', () => {
    const ring = new RingStream(8);
    ring.append(bytes('aaaa'));
    ring.consumed(4);
    expect(ring.start).toBe(0);
    ring.append(bytes('bbbb'));
    expect(ring.start).toBe(0);
    ring.append(bytes('cc'));
    expect(ring.start).toBe(2);
    expect(ring.read(2, 100).data.toString()).toBe('aabbbbcc');
  });

  test('agrees with a model of every byte ever appended, across many chunks and evictions', () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('append' as const), size: fc.integer({ min: 0, max: 40 }) }),
      fc.record({ kind: fc.constant('consume' as const), upTo: fc.nat() }),
      fc.record({ kind: fc.constant('read' as const), from: fc.nat(), maxBytes: fc.integer({ min: 1, max: 120 }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.array(step, { maxLength: 200 }), (capacity, steps) => {
        const ring = new RingStream(capacity);
        let all = Buffer.alloc(0);
        let consumed = 0;
        for (const item of steps) {
          if (item.kind === 'append') {
            const chunk = Buffer.from(Array.from({ length: item.size }, (_, index) => (all.length + index) % 251));
            ring.append(chunk);
            all = Buffer.concat([all, chunk]);
          } else if (item.kind === 'consume') {
            consumed = Math.max(consumed, Math.min(item.upTo, all.length));
            ring.consumed(item.upTo);
          } else if (item.from <= all.length) {
            const slice = ring.read(item.from, item.maxBytes);
            const begin = Math.max(item.from, ring.start);
            expect(slice.from).toBe(begin);
            expect(slice.gap).toEqual(item.from < ring.start ? { from: item.from, to: ring.start } : null);
            expect(slice.data.equals(all.subarray(begin, Math.min(all.length, begin + item.maxBytes)))).toBe(true);
            expect(slice.next).toBe(begin + slice.data.length);
          }
          // Nothing unread is ever dropped, and read bytes are kept up to the capacity.
          expect(ring.start).toBeLessThanOrEqual(consumed);
          expect(ring.end).toBe(all.length);
          expect(ring.retained).toBeGreaterThanOrEqual(Math.min(all.length, capacity));
        }
      }),
      { numRuns: 300 },
    );
  });

  test('notifies on append, consumption and end', () => {
    const ring = new RingStream(8);
    let changes = 0;
    const off = ring.onChange(() => (changes += 1));
    ring.append(bytes('x'));
    ring.consumed(1);
    ring.finish();
    off();
    ring.append(bytes('y'));
    expect(changes).toBe(3);
    expect(ring.ended).toBe(true);
    expect(ring.end).toBe(1);
  });
});

describe('WebSocket streams', () => {
  let daemon: TestDaemon;
  test.beforeAll(({ daemon: fileDaemon }) => {
    daemon = fileDaemon;
  });

  const script = 'seq 1 300000';
  const expected = execFileSync('/bin/sh', ['-c', script], { maxBuffer: 64 * 1024 * 1024 });
  const sha = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

  test('delivers a piped stream byte-exact, then its end', async () => {
    const created = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['/bin/sh', '-c', script], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 },
    });
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    const { sub } = await socket.subscribe({ target: { kind: 'process', id: created.body.id, stream: 'stdout' }, from: 0, window: 256 * 1024 });
    let acked = 0;
    const end = await socket.until('end of stream', () => {
      const received = socket.bytes(sub).length;
      if (received > acked) {
        acked = received;
        socket.send({ t: 'ack', sub, offset: received });
      }
      return socket.messages.find((m) => m.t === 'end' && m.sub === sub) as { offset: number } | undefined;
    });
    expect(end.offset).toBe(expected.length);
    expect(sha(socket.bytes(sub))).toBe(sha(expected));
    socket.close();
  });

  test('never has more than the window in flight without acks', async () => {
    const created = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['/bin/sh', '-c', script], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 },
    });
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    const window = 32 * 1024;
    const { sub } = await socket.subscribe({ target: { kind: 'process', id: created.body.id, stream: 'stdout' }, from: 0, window });
    await socket.until('a window of bytes', () => socket.bytes(sub).length >= window || undefined);
    // Fixed pauses are right here: they check that nothing beyond the window arrives.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(socket.bytes(sub).length).toBe(window);
    socket.send({ t: 'ack', sub, offset: window });
    await socket.until('the next window', () => socket.bytes(sub).length >= 2 * window || undefined);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(socket.bytes(sub).length).toBe(2 * window);
    socket.close();
    await daemon.request('DELETE', `/v1/processes/${created.body.id}`);
  });

  test('resumes from the last received offset after a cut connection, with nothing lost or repeated', async () => {
    const created = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['/bin/sh', '-c', script], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 },
    });
    const target = { kind: 'process', id: created.body.id, stream: 'stdout' };
    const received: Buffer[] = [];
    let offset = 0;
    for (let connection = 0; ; connection += 1) {
      const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
      const { sub, from, gap } = await socket.subscribe({ target, from: offset, window: 64 * 1024 });
      expect(from).toBe(offset);
      expect(gap).toBeNull();
      const cutAfter = offset + 200_000;
      const end = await socket.until('a cut or the end', () => {
        const bytes = socket.bytes(sub);
        const ended = socket.messages.find((m) => m.t === 'end' && m.sub === sub);
        if (ended !== undefined) return 'end';
        if (offset + bytes.length >= cutAfter) return 'cut';
        socket.send({ t: 'ack', sub, offset: offset + bytes.length });
        return undefined;
      });
      // Frames must continue exactly where the last connection stopped.
      const frames = socket.data.get(sub) ?? [];
      let expectedOffset = offset;
      for (const frame of frames) {
        expect(frame.offset).toBe(expectedOffset);
        expectedOffset += frame.payload.length;
      }
      const bytes = socket.bytes(sub);
      received.push(bytes);
      offset += bytes.length;
      socket.socket.terminate();
      if (end === 'end') break;
      expect(connection).toBeLessThan(100);
    }
    expect(sha(Buffer.concat(received))).toBe(sha(expected));
  });

  test('replays a terminal from any retained offset over REST, with an explicit gap before the ring', async ({ startDaemon }) => {
    const small = await startDaemon({ ringBytes: 4096 });
    const created = await small.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/sh', '-c', 'seq 1 5000'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 },
    });
    const id = created.body.id as string;
    // Read everything, acknowledging as we go, so the ring may drop what was read.
    let from = 0;
    const chunks: Buffer[] = [];
    for (;;) {
      // Long enough that only a stall, not a slow machine, answers without bytes.
      const read = await small.request('GET', `/v1/terminals/${id}/output?from=${from}&waitMs=10000`);
      expect(read.status).toBe(200);
      expect(read.body.gap).toBeNull();
      // A long poll answers with bytes: a ring held full by unread bytes must not stall it.
      expect(read.body.data.length > 0 || read.body.ended).toBe(true);
      chunks.push(Buffer.from(read.body.data, 'base64'));
      from = read.body.next;
      if (read.body.ended) break;
    }
    const all = Buffer.concat(chunks).toString();
    expect(all).toBe(execFileSync('/bin/sh', ['-c', 'seq 1 5000']).toString().replaceAll('\n', '\r\n'));
    const info = await small.request('GET', `/v1/terminals/${id}`);
    expect(info.body.output.end).toBe(from);
    const replay = await small.request('GET', `/v1/terminals/${id}/output?from=${from - 100}`);
    expect(Buffer.from(replay.body.data, 'base64').toString()).toBe(all.slice(-100));
    const old = await small.request('GET', `/v1/terminals/${id}/output?from=0`);
    const start = (await small.request('GET', `/v1/terminals/${id}`)).body.output.start as number;
    expect(start).toBeGreaterThan(0);
    expect(old.body.gap).toEqual({ from: 0, to: start });
    expect(old.body.from).toBe(start);
    expect(Buffer.from(old.body.data, 'base64').toString()).toBe(all.slice(start));
  });
});
