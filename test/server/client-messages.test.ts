/**
 * The WebSocket's hand-checked path for calls and acks (the messages of every
 * keystroke) against the schema it stands in for: it never takes a message the
 * schema refuses, and what it takes is what the schema would have made of it.
 */
import { describe, expect, test } from 'vitest';
import { ClientMessage } from '@execworld/sdk/protocol';
import { commonMessage } from '../../service/src/server/ws.ts';

const MESSAGES: unknown[] = [
  { t: 'call', id: 1, op: 'terminal.input', params: { id: 't_x', data: 'a' } },
  { t: 'call', id: 0, op: 'health.get' },
  { t: 'call', id: 2, op: 'x', params: {} },
  { t: 'call', id: -1, op: 'x' },
  { t: 'call', id: 1.5, op: 'x' },
  { t: 'call', id: 2 ** 53, op: 'x' },
  { t: 'call', id: '1', op: 'x' },
  { t: 'call', id: 1, op: 7 },
  { t: 'call', id: 1 },
  { t: 'call', op: 'x' },
  { t: 'call', id: 1, op: 'x', params: null },
  { t: 'call', id: 1, op: 'x', params: [] },
  { t: 'call', id: 1, op: 'x', params: 'a' },
  { t: 'call', id: 1, op: 'x', params: {}, extra: 1 },
  { t: 'call', id: 1, op: 'x', extra: 1 },
  { t: 'call', id: 1, op: 'x', params: undefined },
  { t: 'ack', sub: 1, offset: 10 },
  { t: 'ack', sub: -3, offset: 0 },
  { t: 'ack', sub: 1, offset: -1 },
  { t: 'ack', sub: 1, offset: 0.5 },
  { t: 'ack', sub: 1.5, offset: 1 },
  { t: 'ack', sub: 1, offset: 2 ** 53 },
  { t: 'ack', sub: 1 },
  { t: 'ack', sub: 1, offset: 1, id: 3 },
  { t: 'subscribe', id: 1, params: { target: { kind: 'terminal', id: 't_x', stream: 'output' }, from: 0 } },
  { t: 'unsubscribe', id: 1, sub: 2 },
  { t: 'nope' },
  null,
  [],
  'call',
  7,
  Object.create({ t: 'call', id: 1, op: 'x' }),
];

describe('the hand-checked calls and acks', () => {
  test.each(MESSAGES.map((message) => [JSON.stringify(message) ?? String(message), message]))('%s: taken only as the schema takes it', (_name, message) => {
    const fast = commonMessage(message);
    const schema = ClientMessage.safeParse(message);
    if (fast !== undefined) {
      expect(schema.success).toBe(true);
      expect(fast).toEqual(schema.data);
    }
  });

  test('takes the calls and acks a client sends on every keystroke, so they skip the schema', () => {
    expect(commonMessage(JSON.parse('{"t":"call","id":9,"op":"terminal.input","params":{"id":"t_a","data":"x","writer":"w","seq":3}}'))).toEqual({
      t: 'call',
      id: 9,
      op: 'terminal.input',
      params: { id: 't_a', data: 'x', writer: 'w', seq: 3 },
    });
    expect(commonMessage(JSON.parse('{"t":"ack","sub":4,"offset":1024}'))).toEqual({ t: 'ack', sub: 4, offset: 1024 });
  });
});
