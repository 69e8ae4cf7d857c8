/**
 * The protocol client over a linked pair of channels in memory, the test's
 * end playing the daemon: answers go to the call they name, a call in flight
 * when its channel closes is sent again on the next exactly when the
 * operation table says it is safe, subscriptions resume from the byte after
 * the last one delivered, acknowledgements open the window, and the calls
 * and subscriptions it holds are bounded.
 */
import { describe, expect, it } from 'vitest';
import { MemoryChannel, ProtocolClient, Redialer, type Channel } from '@execworld/sdk/client';
import { encodeDataFrame } from '@execworld/sdk/protocol';
import { waitFor } from '../helpers/wait.ts';

/** The daemon's end of one channel: what it was sent, and the means to answer. */
class DaemonEnd {
  readonly received: Record<string, any>[] = [];
  readonly channel: MemoryChannel;
  constructor(channel: MemoryChannel) {
    this.channel = channel;
    channel.onmessage = (frame) => {
      if (typeof frame === 'string') this.received.push(JSON.parse(frame));
    };
  }
  calls(op?: string): Record<string, any>[] {
    return this.received.filter((message) => message.t === 'call' && (op === undefined || message.op === op));
  }
  of(t: string): Record<string, any>[] {
    return this.received.filter((message) => message.t === t);
  }
  answer(id: number, result: unknown): void {
    this.channel.send(JSON.stringify({ t: 'result', id, result }));
  }
  refuse(id: number, code: string, message: string): void {
    this.channel.send(JSON.stringify({ t: 'error', id, error: { code, message } }));
  }
  data(sub: number, offset: number, text: string): void {
    this.channel.sendBinary(encodeDataFrame(sub, offset, new TextEncoder().encode(text)));
  }
  async next(what: string, count: number, filter: () => Record<string, any>[]): Promise<Record<string, any>[]> {
    await waitFor(what, () => filter().length >= count);
    return filter();
  }
}

function linked(client: ProtocolClient): DaemonEnd {
  const [near, far] = MemoryChannel.createLinkedPair();
  const daemon = new DaemonEnd(far);
  client.attach(near);
  return daemon;
}

const newClient = (options: { maxCalls?: number; maxSubscriptions?: number } = {}): ProtocolClient =>
  new ProtocolClient({ requestTimeoutMs: 30_000, windowBytes: 256 * 1024, ...options });

/** Breaks the channel as a network failure would: no close frame, code 1006. */
const drop = (daemon: DaemonEnd): void => daemon.channel.close(1006, 'broken');

describe('the protocol client over a channel', () => {
  it('gives each answer to the call it names, in whatever order they come', async () => {
    const client = newClient();
    const daemon = linked(client);
    const first = client.call('terminal.get', { id: 't1' });
    const second = client.call('terminal.get', { id: 't2' });
    const third = client.call('terminal.get', { id: 't3' });
    const [a, b, c] = await daemon.next('three calls', 3, () => daemon.calls('terminal.get'));
    expect(new Set([a!.id, b!.id, c!.id]).size).toBe(3);
    daemon.answer(c!.id, { id: 't3' });
    daemon.refuse(a!.id, 'NOT_FOUND', 'no terminal t1');
    daemon.answer(b!.id, { id: 't2' });
    // An answer to no call is dropped.
    daemon.answer(999_999, { id: 'nobody' });
    await expect(second).resolves.toEqual({ id: 't2' });
    await expect(third).resolves.toEqual({ id: 't3' });
    await expect(first).rejects.toMatchObject({ name: 'NotFoundError', code: 'NOT_FOUND', status: 404, message: 'no terminal t1' });
    client.close();
  });

  it('sends again on the next channel the calls the table calls idempotent, and fails the others with OUTCOME_UNKNOWN', async () => {
    const client = newClient();
    const lost: string[] = [];
    client.onlost = (reason) => lost.push(`${reason.code} ${reason.reason}`);
    const daemon = linked(client);
    const read = client.call('terminal.get', { id: 't1' });
    const signal = client.call('terminal.signal', { id: 't1', signal: 'SIGINT' });
    const create = client.call('terminal.create', { argv: ['/bin/sh'], rows: 24, cols: 80 });
    const createOnce = client.call('terminal.create', { argv: ['/bin/sh'], rows: 24, cols: 80, requestId: 'r-1' });
    const write = client.call('terminal.input', { id: 't1', data: 'x', writer: 'w', seq: 1 });
    const writeBare = client.call('terminal.input', { id: 't1', data: 'y' });
    const run = client.call('shell.run', { id: 's1', command: 'true' });
    await daemon.next('seven calls', 7, () => daemon.calls());
    drop(daemon);

    for (const call of [signal, create, writeBare, run]) {
      await expect(call).rejects.toMatchObject({ name: 'ConnectionError', code: 'OUTCOME_UNKNOWN' });
    }
    expect(lost).toEqual(['1006 broken']);
    expect(client.connected).toBe(false);

    const again = linked(client);
    await again.next('the idempotent calls again', 3, () => again.calls());
    // A call made now goes after whatever was sent again: once it arrived, so had they.
    const marker = client.call('health.get', {});
    await again.next('the call made after the resends', 1, () => again.calls('health.get'));
    const resent = again.calls().filter((call) => call.op !== 'health.get');
    // The same messages, ids and all, in the order they were made; nothing else.
    expect(resent.map((call) => [call.op, call.params])).toEqual([
      ['terminal.get', { id: 't1' }],
      ['terminal.create', { argv: ['/bin/sh'], rows: 24, cols: 80, requestId: 'r-1' }],
      ['terminal.input', { id: 't1', data: 'x', writer: 'w', seq: 1 }],
    ]);
    const firstIds = new Map(daemon.calls().map((call) => [JSON.stringify([call.op, call.params]), call.id]));
    for (const call of resent) expect(call.id).toBe(firstIds.get(JSON.stringify([call.op, call.params])));
    again.answer(again.calls('health.get')[0]!.id, { status: 'ok' });
    await marker;
    for (const call of resent) again.answer(call.id, { ok: call.op });
    await expect(read).resolves.toEqual({ ok: 'terminal.get' });
    await expect(createOnce).resolves.toEqual({ ok: 'terminal.create' });
    await expect(write).resolves.toEqual({ ok: 'terminal.input' });
    client.close();
  });

  it('holds a call made while no channel is open until one is attached', async () => {
    const client = newClient();
    const daemon = linked(client);
    drop(daemon);
    await waitFor('the loss', () => !client.connected);
    const read = client.call('terminal.list', {});
    const again = linked(client);
    const [call] = await again.next('the call', 1, () => again.calls('terminal.list'));
    again.answer(call!.id, { terminals: [] });
    await expect(read).resolves.toEqual({ terminals: [] });
    client.close();
  });

  it('resumes a subscription on the next channel from the byte after the last one delivered, and says what the daemon no longer held', async () => {
    const client = newClient();
    const daemon = linked(client);
    const events: string[] = [];
    const subscription = client.subscribe({ kind: 'terminal', id: 't1', stream: 'output' }, 0, {
      onData: (chunk, offset) => events.push(`data ${offset} ${new TextDecoder().decode(chunk)}`),
      onGap: (from, to) => events.push(`gap ${from}-${to}`),
      onEnd: (offset) => events.push(`end ${offset}`),
      onError: (error) => events.push(`error ${error.code}`),
    });
    const [subscribe] = await daemon.next('the subscribe', 1, () => daemon.of('subscribe'));
    expect(subscribe!.params).toEqual({ target: { kind: 'terminal', id: 't1', stream: 'output' }, from: 0, window: 256 * 1024 });
    daemon.answer(subscribe!.id, { sub: 7, from: 0, gap: null });
    daemon.data(7, 0, 'hello ');
    daemon.data(7, 6, 'world');
    await waitFor('the bytes', () => events.length === 2);
    // Credits: acknowledged up to what was delivered, never beyond.
    subscription.ack(1_000);
    const [ack] = await daemon.next('the ack', 1, () => daemon.of('ack'));
    expect(ack).toEqual({ t: 'ack', sub: 7, offset: 11 });

    drop(daemon);
    const again = linked(client);
    const [resubscribe] = await again.next('the subscribe again', 1, () => again.of('subscribe'));
    expect(resubscribe!.params.from).toBe(11);
    // The daemon's ring moved on meanwhile: it holds from byte 20.
    again.answer(resubscribe!.id, { sub: 3, from: 20, gap: { from: 11, to: 20 } });
    again.data(3, 20, '!');
    // A frame of the old subscription's number, or bytes already delivered, change nothing.
    again.data(7, 11, 'stale');
    again.data(3, 15, 'abcdef');
    again.channel.send(JSON.stringify({ t: 'end', sub: 3, offset: 21 }));
    await waitFor('the end', () => events.at(-1) === 'end 21');
    expect(events).toEqual(['data 0 hello ', 'data 6 world', 'gap 11-20', 'data 20 !', 'end 21']);
    client.close();
  });

  it('bounds the calls it holds and the subscriptions it keeps, with LIMIT_EXCEEDED', async () => {
    const client = newClient({ maxCalls: 3, maxSubscriptions: 2 });
    const daemon = linked(client);
    drop(daemon);
    await waitFor('the loss', () => !client.connected);
    const held = [client.call('terminal.list', {}), client.call('process.list', {}), client.call('shell.list', {})];
    await expect(client.call('health.get', {})).rejects.toMatchObject({
      name: 'LimitError',
      code: 'LIMIT_EXCEEDED',
      message: expect.stringMatching(/3 calls/),
    });
    const errors: string[] = [];
    const handlers = (name: string) => ({
      onData: () => undefined,
      onGap: () => undefined,
      onEnd: () => undefined,
      onError: (error: { code: string }) => errors.push(`${name} ${error.code}`),
    });
    client.subscribe({ kind: 'process', id: 'p1', stream: 'stdout' }, 0, handlers('first'));
    client.subscribe({ kind: 'process', id: 'p1', stream: 'stderr' }, 0, handlers('second'));
    client.subscribe({ kind: 'process', id: 'p2', stream: 'stdout' }, 0, handlers('third'));
    await waitFor('the refusal', () => errors.length === 1);
    expect(errors).toEqual(['third LIMIT_EXCEEDED']);
    // Once a channel is back, the calls held go out and room comes back as they are answered.
    const again = linked(client);
    const calls = await again.next('the held calls', 3, () => again.calls());
    for (const call of calls) again.answer(call.id, {});
    await Promise.all(held);
    const health = client.call('health.get', {});
    const [call] = await again.next('health', 1, () => again.calls('health.get'));
    again.answer(call!.id, { status: 'ok' });
    await expect(health).resolves.toEqual({ status: 'ok' });
    client.close();
  });

  it('fails what it holds once its transport gives up, and on close', async () => {
    const client = newClient();
    const daemon = linked(client);
    const read = client.call('terminal.get', { id: 't1' });
    const errors: string[] = [];
    client.subscribe({ kind: 'terminal', id: 't1', stream: 'output' }, 0, {
      onData: () => undefined,
      onGap: () => undefined,
      onEnd: () => undefined,
      onError: (error) => errors.push(error.code),
    });
    drop(daemon);
    await waitFor('the loss', () => !client.connected);
    const { ConnectionError } = await import('@execworld/sdk/client');
    client.fail(new ConnectionError('CONNECTION_LOST', 'gone for good'));
    await expect(read).rejects.toMatchObject({ code: 'CONNECTION_LOST' });
    expect(errors).toEqual(['CONNECTION_LOST']);
    await expect(client.call('health.get', {})).rejects.toMatchObject({ code: 'CONNECTION_LOST' });
    // A channel offered now is closed at once.
    const [near] = MemoryChannel.createLinkedPair();
    client.attach(near);
    await waitFor('the offered channel to close', () => near.state === 'closed');

    const other = newClient();
    const end = linked(other);
    const owed = other.call('terminal.list', {});
    await end.next('the call', 1, () => end.calls());
    other.close();
    await expect(owed).rejects.toMatchObject({ code: 'CLOSED' });
    await waitFor('the channel to close', () => end.channel.state === 'closed');
  });
});

describe('the redial loop', () => {
  it('dials again after a loss, with a delay that doubles, and fails the client with CONNECTION_LOST past the deadline', async () => {
    const client = newClient();
    const daemons: DaemonEnd[] = [];
    let reachable = true;
    const dial = (): Promise<Channel> => {
      if (!reachable) return Promise.reject(new Error('connection refused'));
      const [near, far] = MemoryChannel.createLinkedPair();
      daemons.push(new DaemonEnd(far));
      return Promise.resolve(near);
    };
    const failures: (number | undefined)[] = [];
    const redialer = new Redialer(
      client,
      dial,
      { target: 'memory://daemon', initialDelayMs: 5, maxDelayMs: 40, deadlineMs: 400 },
      { onDialFailed: (_error, delay) => failures.push(delay) },
    );
    redialer.start();
    await waitFor('the first channel', () => client.connected);
    const read = client.call('terminal.get', { id: 't1' });
    await daemons[0]!.next('the call', 1, () => daemons[0]!.calls());
    drop(daemons[0]!);
    await waitFor('the second channel', () => daemons.length === 2 && client.connected);
    const [again] = await daemons[1]!.next('the call again', 1, () => daemons[1]!.calls());
    daemons[1]!.answer(again!.id, { id: 't1' });
    await expect(read).resolves.toEqual({ id: 't1' });

    reachable = false;
    const owed = client.call('terminal.get', { id: 't1' });
    await daemons[1]!.next('the call', 2, () => daemons[1]!.calls());
    drop(daemons[1]!);
    await expect(owed).rejects.toMatchObject({
      code: 'CONNECTION_LOST',
      message: expect.stringContaining('memory://daemon could not be reached again within 400 ms'),
    });
    // Each failed dial waited twice as long as the one before, up to the longest delay.
    expect(failures.slice(0, 4)).toEqual([10, 20, 40, 40]);
    expect(failures.at(-1)).toBeUndefined();
    redialer.stop();
    client.close();
  });
});
