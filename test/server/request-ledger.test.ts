/**
 * Idempotent creates: one request ledger remembers the creates made with a
 * requestId, for sessions (terminals and processes) and for shells alike. A
 * retry gets what the first made, a failed create may be retried for real,
 * what is forgotten may be made again, and the ledger holds a bounded number
 * of entries per owner.
 */
import { describe, expect } from 'vitest';
import type { Principal } from '../../service/src/server/auth.ts';
import { RequestLedger } from '../../service/src/server/sessions/request-ledger.ts';
import { BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

const test = daemonTest();

const principal = (owner: string): Principal => ({ owner, access: 'write', runAs: undefined, root: undefined });
const ALICE = principal('alice');

/** A promise and the function that settles it. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => (resolve = settle));
  return { promise, resolve };
}

interface Thing {
  readonly id: string;
  readonly kind: 'box' | 'bag';
}

/** A create that makes a new thing of `kind` each time it runs, counting its runs. */
function maker(kind: Thing['kind'] = 'box') {
  let runs = 0;
  return {
    get runs() {
      return runs;
    },
    create: (): Promise<Thing> => {
      runs += 1;
      return Promise.resolve({ id: `${kind}-${runs}`, kind });
    },
  };
}

describe('the request ledger', () => {
  test('answers a retry with what the first create made, even while the first is under way', async () => {
    const ledger = new RequestLedger<Thing>(4);
    const first = deferred<Thing>();
    let runs = 0;
    const create = (): Promise<Thing> => {
      runs += 1;
      return first.promise;
    };
    const original = ledger.once(ALICE, 'r1', 'box', create);
    const retry = ledger.once(ALICE, 'r1', 'box', create);
    first.resolve({ id: 'box-1', kind: 'box' });
    expect(await original).toEqual({ id: 'box-1', kind: 'box' });
    expect(await retry).toBe(await original);
    expect(await ledger.once(ALICE, 'r1', 'box', create)).toBe(await original);
    expect(runs).toBe(1);
    // Without a requestId every call creates.
    const plain = maker();
    await ledger.once(ALICE, undefined, 'box', plain.create);
    await ledger.once(ALICE, undefined, 'box', plain.create);
    expect(plain.runs).toBe(2);
  });

  test("keys by the principal's owner and the requestId, and refuses one requestId for another kind", async () => {
    const ledger = new RequestLedger<Thing>(4);
    const boxes = maker('box');
    const made = await ledger.once(ALICE, 'r1', 'box', boxes.create);
    // Another token of alice's is alice: the same create.
    expect(await ledger.once({ ...ALICE, access: 'read' }, 'r1', 'box', boxes.create)).toBe(made);
    // Bob's r1 is his own.
    expect(await ledger.once(principal('bob'), 'r1', 'box', boxes.create)).not.toBe(made);
    expect(boxes.runs).toBe(2);
    await expect(ledger.once(ALICE, 'r1', 'bag', maker('bag').create)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'requestId r1 already created a box',
    });
  });

  test('lets a create that failed, or whose thing was forgotten, be made again', async () => {
    const ledger = new RequestLedger<Thing>(4);
    await expect(ledger.once(ALICE, 'r1', 'box', () => Promise.reject<Thing>(new Error('no room')))).rejects.toThrow('no room');
    const boxes = maker();
    const made = await ledger.once(ALICE, 'r1', 'box', boxes.create);
    expect(made.id).toBe('box-1');
    ledger.forget(made.id);
    expect(ledger.size).toBe(0);
    expect((await ledger.once(ALICE, 'r1', 'box', boxes.create)).id).toBe('box-2');
  });

  test('holds at most its bound per owner, forgetting the oldest answered create first', async () => {
    const ledger = new RequestLedger<Thing>(2);
    const boxes = maker();
    await ledger.once(ALICE, 'r1', 'box', boxes.create);
    await ledger.once(ALICE, 'r2', 'box', boxes.create);
    await ledger.once(principal('bob'), 'r1', 'box', boxes.create);
    expect(ledger.size).toBe(3);
    for (let index = 3; index <= 20; index += 1) {
      await ledger.once(ALICE, `r${index}`, 'box', boxes.create);
      expect(ledger.size).toBe(3);
    }
    console.log(`ledger entries after 21 creates with a requestId, bound 2 per owner, two owners: ${ledger.size}`);
    // The newest two of alice's are remembered; r1 was forgotten and is made again; bob's stays.
    const runs = boxes.runs;
    expect((await ledger.once(ALICE, 'r20', 'box', boxes.create)).id).toBe('box-21');
    expect((await ledger.once(principal('bob'), 'r1', 'box', boxes.create)).id).toBe('box-3');
    expect(boxes.runs).toBe(runs);
    expect((await ledger.once(ALICE, 'r1', 'box', boxes.create)).id).toBe(`box-${runs + 1}`);
  });

  test('refuses a create past its bound when every entry is a create still under way', async () => {
    const ledger = new RequestLedger<Thing>(2);
    const pending = [deferred<Thing>(), deferred<Thing>()];
    const first = ledger.once(ALICE, 'r1', 'box', () => pending[0]!.promise);
    const second = ledger.once(ALICE, 'r2', 'box', () => pending[1]!.promise);
    await expect(ledger.once(ALICE, 'r3', 'box', maker().create)).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' });
    expect(ledger.size).toBe(2);
    pending[0]!.resolve({ id: 'box-1', kind: 'box' });
    pending[1]!.resolve({ id: 'box-2', kind: 'box' });
    await Promise.all([first, second]);
    // Answered, the oldest makes room.
    expect((await ledger.once(ALICE, 'r3', 'box', maker().create)).id).toBe('box-1');
    expect(ledger.size).toBe(2);
  });

  test('takes no bound below one entry', () => {
    expect(() => new RequestLedger<Thing>(0)).toThrow(RangeError);
  });
});

describe('a create retried with the same requestId, on a daemon', () => {
  let daemon: TestDaemon;
  test.beforeAll(({ daemon: fileDaemon }) => {
    daemon = fileDaemon;
  });

  test('answers the same shell, made once, until the shell is deleted', async () => {
    const body = { cwd: '/tmp', requestId: 'shell-retry-1' };
    const [first, retry] = await Promise.all([daemon.request('POST', '/v1/shells', { body }), daemon.request('POST', '/v1/shells', { body })]);
    expect(first.status).toBe(201);
    expect(retry.body.id).toBe(first.body.id);
    expect((await daemon.request('POST', '/v1/shells', { body })).body.id).toBe(first.body.id);
    const shells = (await daemon.request('GET', '/v1/shells')).body.shells as { id: string }[];
    expect(shells.filter((shell) => shell.id === first.body.id)).toHaveLength(1);
    expect(shells).toHaveLength(1);
    // Bob's create with the same requestId is his own shell.
    const bobs = await daemon.request('POST', '/v1/shells', { body, token: BOB });
    expect(bobs.status).toBe(201);
    expect(bobs.body.id).not.toBe(first.body.id);
    await daemon.request('DELETE', `/v1/shells/${bobs.body.id}`, { token: BOB });
    // Deleted, the shell is forgotten: the same requestId makes a new one.
    expect((await daemon.request('DELETE', `/v1/shells/${first.body.id}`)).status).toBe(200);
    const again = await daemon.request('POST', '/v1/shells', { body });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(first.body.id);
    await daemon.request('DELETE', `/v1/shells/${again.body.id}`);
  });

  test('answers the same terminal or process, and refuses the requestId for the other kind', async () => {
    const terminal = { argv: ['/bin/sh'], cwd: '/tmp', rows: 24, cols: 80, requestId: 'session-retry-1' };
    const [first, retry] = await Promise.all([
      daemon.request('POST', '/v1/terminals', { body: terminal }),
      daemon.request('POST', '/v1/terminals', { body: terminal }),
    ]);
    expect(first.status).toBe(201);
    expect(retry.body.id).toBe(first.body.id);
    expect((await daemon.request('GET', '/v1/terminals')).body.terminals.filter((each: { id: string }) => each.id === first.body.id)).toHaveLength(1);
    const process = { argv: ['/bin/cat'], cwd: '/tmp', stdio: { stdin: 'pipe' }, requestId: 'session-retry-1' };
    const refused = await daemon.request('POST', '/v1/processes', { body: process });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', message: 'requestId session-retry-1 already created a terminal' });

    const cat = { ...process, requestId: 'session-retry-2' };
    const made = await daemon.request('POST', '/v1/processes', { body: cat });
    expect(made.status).toBe(201);
    expect((await daemon.request('POST', '/v1/processes', { body: cat })).body.id).toBe(made.body.id);
    // Deleted, the session is forgotten: the same requestId makes a new one.
    await daemon.request('DELETE', `/v1/processes/${made.body.id}`);
    const again = await daemon.request('POST', '/v1/processes', { body: cat });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(made.body.id);
    await daemon.request('DELETE', `/v1/processes/${again.body.id}`);
    await daemon.request('DELETE', `/v1/terminals/${first.body.id}`);
  });
});
