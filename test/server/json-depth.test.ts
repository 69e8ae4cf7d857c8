/**
 * A request body or a WebSocket message nested deeper than any call's
 * parameters is refused before it is parsed: parsed, a text of brackets a
 * million deep builds a million arrays and holds the daemon meanwhile. Text
 * that only holds brackets in its strings (a file's content) is parsed as
 * before, escaped quotes and all.
 */
import { describe, expect } from 'vitest';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../service/src/server/json-text.ts';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

let daemon: TestDaemon;
const test = daemonTest();
test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

const deep = (levels: number): string => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('JSON from a client', () => {
  test('is told too deep by its structure alone, never by the brackets and quotes in its strings', () => {
    expect(nestsDeeperThan(deep(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(nestsDeeperThan(deep(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    const content = `${'[{'.repeat(500)} "quoted\\" \\\\" ${deep(500)}`;
    const text = JSON.stringify({ path: '/tmp/x', content, more: [content, { content }] });
    expect(nestsDeeperThan(text, MAX_JSON_DEPTH)).toBe(false);
    expect(JSON.parse(text)).toMatchObject({ content });
    // A string that ends on escaped backslashes, then structure.
    expect(nestsDeeperThan(`["a\\\\\\\\",${deep(MAX_JSON_DEPTH)}]`, MAX_JSON_DEPTH)).toBe(true);
  });

  test('nested a million deep is refused with 400 naming the nesting, over HTTP and the WebSocket, and the daemon answers on', async () => {
    const body = `{"path":"/tmp","content":${deep(1_000_000)}}`;
    const response = await fetch(`${daemon.url}/v1/fs/write-text`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
      body,
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: { code: 'INVALID_ARGUMENT', message: `the request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` },
    });
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    try {
      socket.socket.send(`{"t":"call","id":1,"op":"process.create","params":{"argv":${deep(1_000_000)}}}`);
      const refused = await socket.until('the refusal', () => socket.messages.find((message) => message.t === 'error'));
      expect(refused).toEqual({
        t: 'error',
        id: null,
        error: { code: 'INVALID_ARGUMENT', message: `message nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` },
      });
      await expect(socket.call('identity.get')).resolves.toMatchObject({ owner: 'alice' });
    } finally {
      socket.close();
    }
  });
});
