/**
 * Every error answer has the documented shape, `{"error":{"code","message"}}`
 * with a catalog code and its status — also the ones made before a route runs:
 * by Node's HTTP parser (431, a bad Content-Length), by the router (a malformed
 * URL, a path segment past its limit), by `ws` refusing a handshake. Ids are
 * opaque: one of any shape that names nothing is 404, like an unknown one.
 */
import { connect as connectTcp } from 'node:net';
import { describe, expect } from 'vitest';
import { ERROR_CATALOG, ERROR_CODES, OPERATION_LIST } from '@execworld/sdk/protocol';
import { clientError } from '../../service/src/server/http-errors.ts';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

let daemon: TestDaemon;
let port: number;
const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  port = Number(new URL(daemon.url).port);
});

interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: any;
}

/** Sends `text` as it is on a fresh connection and reads the one answer until the daemon closes. */
function raw(text: string, halfClose = false): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connectTcp(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer to ${JSON.stringify(text.slice(0, 80))}: ${Buffer.concat(chunks).toString()}`));
    }, 20_000);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const answer = Buffer.concat(chunks).toString('utf8');
      const split = answer.indexOf('\r\n\r\n');
      const [statusLine = '', ...headerLines] = answer.slice(0, split).split('\r\n');
      const headers = Object.fromEntries(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      const bodyText = answer.slice(split + 4);
      let body: unknown = bodyText;
      try {
        body = JSON.parse(bodyText);
      } catch (_error) {
        // Left as text: the assertions say it is not the shape.
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
    socket.write(text, () => {
      if (halfClose) socket.end();
    });
  });
}

const AUTH = `authorization: Bearer ${ALICE}\r\n`;

/** Asserts the documented error shape with `code`, its catalog status and a JSON content type. */
function expectError(answer: { status: number; body: any; headers?: Record<string, string> }, code: string): void {
  expect(ERROR_CODES, JSON.stringify(answer.body)).toContain(code);
  expect(answer.status, JSON.stringify(answer.body)).toBe(ERROR_CATALOG[code as keyof typeof ERROR_CATALOG].status);
  expect(answer.body).toEqual({ error: { code, message: expect.any(String) } });
  expect(answer.body.error.message.length).toBeGreaterThan(0);
  if (answer.headers !== undefined) expect(answer.headers['content-type']).toMatch(/^application\/json/);
}

describe('ids are opaque', () => {
  const malformed = ['xyz', '%00', '..%2F..%2Fetc', 'p_has%20space', `t_${'x'.repeat(90)}`];
  const withId = OPERATION_LIST.filter((spec) => spec.path.includes('{id}'));

  /** Valid bodies and queries, so that only the id can be what is wrong. */
  const BODIES: Record<string, unknown> = {
    'terminal.input': { data: 'x' },
    'terminal.resize': { rows: 10, cols: 10 },
    'terminal.signal': { signal: 'SIGINT' },
    'process.stdin': { data: 'x' },
    'process.wait': { timeoutMs: 0 },
    'shell.run': { command: 'true' },
    'shell.send': { input: 'x' },
    'port.shutdown': { offset: 0 },
  };
  /** The bytes of a call that carries them, with their media type. */
  const byteBody = (spec: (typeof withId)[number]) =>
    spec.body === 'bytes' ? { raw: 'x', headers: { 'content-type': spec.bytes?.body ?? 'application/octet-stream' } } : {};

  test.each(withId.map((spec) => [spec.name, spec] as const))('%s answers a malformed id with 404 NOT_FOUND', async (_name, spec) => {
    for (const id of malformed) {
      const query = spec.name === 'process.collected' ? '?from=0' : spec.name === 'upload.bytes' ? '?offset=0' : '';
      const path = spec.path.replace('{id}', id).replace('{stream}', 'stdout') + query;
      const answer = await daemon.request(spec.method, path, spec.method === 'POST' ? { body: BODIES[spec.name] ?? {} } : byteBody(spec));
      expectError(answer, 'NOT_FOUND');
    }
  });

  test('answers a malformed id over the WebSocket with NOT_FOUND too', async () => {
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    await expect(socket.call('terminal.get', { id: 'xyz' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(socket.call('process.get', { id: '\0' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    socket.close();
  });
});

describe('errors made before a route runs', () => {
  test('answers a path segment past 100 characters with 414 URI_TOO_LONG', async () => {
    expectError(await daemon.request('GET', `/v1/terminals/t_${'x'.repeat(200)}`), 'URI_TOO_LONG');
  });

  test('answers headers past 16 KiB, and a URL that long, with 431 HEADERS_TOO_LARGE', async () => {
    expectError(await raw(`GET /v1/terminals HTTP/1.1\r\nhost: x\r\n${AUTH}x-big: ${'b'.repeat(20_000)}\r\n\r\n`), 'HEADERS_TOO_LARGE');
    expectError(await raw(`GET /v1/terminals?q=${'a'.repeat(20_000)} HTTP/1.1\r\nhost: x\r\n${AUTH}\r\n`), 'HEADERS_TOO_LARGE');
  });

  test.each([
    ['a Content-Length that is not a number', `POST /v1/terminals HTTP/1.1\r\nhost: x\r\n${AUTH}content-length: abc\r\n\r\n`, false],
    [
      'both Content-Length and Transfer-Encoding',
      `POST /v1/terminals HTTP/1.1\r\nhost: x\r\n${AUTH}content-length: 2\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`,
      false,
    ],
    ['a request line that is not HTTP', 'HELLO\r\n\r\n', false],
    [
      'a body shorter than its Content-Length',
      `POST /v1/executables/resolve HTTP/1.1\r\nhost: x\r\n${AUTH}content-type: application/json\r\ncontent-length: 20\r\n\r\n{}`,
      true,
    ],
    ['a malformed percent-encoding', `GET /v1/terminals/%zz HTTP/1.1\r\nhost: x\r\n${AUTH}connection: close\r\n\r\n`, false],
    ['an HTTP/1.1 request without Host', `GET /v1/terminals HTTP/1.1\r\n${AUTH}connection: close\r\n\r\n`, false],
    [
      'a WebSocket handshake ws refuses',
      `GET /v1/connect HTTP/1.1\r\nhost: x\r\n${AUTH}upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: ` +
        `dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 99\r\nsec-websocket-protocol: execworld.v1\r\n\r\n`,
      false,
    ],
  ])('answers %s with 400 INVALID_ARGUMENT', async (_name, text, halfClose) => {
    expectError(await raw(text, halfClose), 'INVALID_ARGUMENT');
  });

  test('answers GET /v1/connect without an upgrade with 426 UPGRADE_REQUIRED', async () => {
    const answer = await raw(`GET /v1/connect HTTP/1.1\r\nhost: x\r\n${AUTH}connection: close\r\n\r\n`);
    expectError(answer, 'UPGRADE_REQUIRED');
    expect(answer.headers.upgrade).toBe('websocket');
    expectError(await daemon.request('GET', '/v1/connect', { token: null }), 'UNAUTHORIZED');
  });

  test.each(['/v1/terminals', '/v1/health', '/livez', '/ui', '/v1/files/content?path=/tmp'])(
    'refuses a WebSocket upgrade on %s, which is no WebSocket, with 400 INVALID_ARGUMENT (never 101)',
    async (path) => {
      const answer = await raw(
        `GET ${path} HTTP/1.1\r\nhost: x\r\n${AUTH}upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: ` +
          `dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\nsec-websocket-protocol: execworld.v1\r\n\r\n`,
      );
      expectError(answer, 'INVALID_ARGUMENT');
      expect(answer.body.error.message).toContain('/v1/connect');
    },
  );

  test('still refuses an upgrade on an unknown path with 404 and a stranger with 401', async () => {
    const upgrade = `upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n`;
    expectError(await raw(`GET /v1/nothing-here HTTP/1.1\r\nhost: x\r\n${AUTH}${upgrade}\r\n`), 'NOT_FOUND');
    expectError(await raw(`GET /v1/terminals HTTP/1.1\r\nhost: x\r\n${upgrade}\r\n`), 'UNAUTHORIZED');
  });

  test('answers a GET with a body as one without it', async () => {
    const answer = await raw(`GET /v1/terminals HTTP/1.1\r\nhost: x\r\n${AUTH}content-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nab`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ terminals: [] });
  });

  test("names headers that never finished 408 CLIENT_TIMEOUT (Node's 60 s headers timeout, too slow to wait for here)", () => {
    const answer = clientError(Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }));
    expect(answer).toMatchObject({ code: 'CLIENT_TIMEOUT', status: 408 });
  });
});
