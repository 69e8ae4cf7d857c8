/**
 * Request bodies are bounded before they are read whole: each operation takes
 * a body of at most what it carries (413 as soon as Content-Length says
 * more), and the bytes of the bodies that all requests hold at once have a
 * daemon-wide budget (429 past it). A flood of large bodies against the real
 * daemon, in a child process, shows what its memory does (printed).
 */
import { connect as netConnect, type Socket } from 'node:net';
import { request } from 'node:http';
import { describe, expect } from 'vitest';
import { ALICE } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';

const MiB = 1024 * 1024;
const STDIN = '/v1/processes/p_unknown0000/stdin';

const test = daemonTest();

/** A raw HTTP/1.1 request on a socket of its own: its headers and the first `sent` bytes of `body`; the answer as it arrives. */
async function rawRequest(url: string, path: string, body: Buffer, sent: number): Promise<{ socket: Socket; answer: () => string }> {
  const { hostname, port } = new URL(url);
  const socket = netConnect(Number(port), hostname);
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  socket.write(
    `POST ${path} HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${ALICE}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
  );
  if (sent > 0) socket.write(body.subarray(0, sent));
  return { socket, answer: () => answer };
}

/** A JSON body of `bytes` bytes that writes to a process's stdin. */
const stdinBody = (bytes: number): Buffer => Buffer.from(`{"data":"${'x'.repeat(bytes - 11)}"}`);

describe("a body past its operation's limit", () => {
  test('is refused with 413 naming the limit as soon as its Content-Length says so, before any of it is sent', async ({ daemon }) => {
    // 1 MiB is far below the daemon's --max-body-bytes (32 MiB), and far above what a resize carries.
    const { socket, answer } = await rawRequest(daemon.url, '/v1/terminals/t_unknown0000/resize', Buffer.alloc(MiB, 32), 0);
    await waitFor('the answer to a body that was never sent', () => answer().includes('}'));
    expect(answer()).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(answer().slice(answer().indexOf('\r\n\r\n') + 4))).toEqual({
      error: { code: 'PAYLOAD_TOO_LARGE', message: 'the request body is larger than 65536 bytes, the most this call takes' },
    });
    socket.destroy();
    const resize = await daemon.request('POST', '/v1/terminals/t_unknown0000/resize', {
      raw: JSON.stringify({ rows: 10, cols: 10, pad: ' '.repeat(100_000) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(resize).toMatchObject({ status: 413, body: { error: { code: 'PAYLOAD_TOO_LARGE' } } });
  });

  test("is each operation's own: input takes up to 8 MiB, data up to the daemon's --max-body-bytes", async ({ daemon }) => {
    // Read and validated: the unknown session answers, not the size.
    const input = await daemon.request('POST', '/v1/terminals/t_unknown0000/input', { body: { data: 'x'.repeat(MiB) } });
    expect(input).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
    const over = await daemon.request('POST', '/v1/terminals/t_unknown0000/input', {
      raw: JSON.stringify({ data: 'x'.repeat(9 * MiB) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(over).toMatchObject({ status: 413, body: { error: { code: 'PAYLOAD_TOO_LARGE', message: expect.stringContaining(`${8 * MiB} bytes`) as string } } });
    const data = await daemon.request('POST', STDIN, { body: { data: 'x'.repeat(12 * MiB) } });
    expect(data).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } });
  });
});

describe('the bodies of all requests together', () => {
  test('are held within --body-budget-bytes: past it a request is refused with 429 naming the bound, until bodies are done', async ({ startDaemon }) => {
    const daemon = await startDaemon({ maxBodyBytes: MiB, bodyBudgetBytes: MiB });
    const bodies = (): number => daemon.daemon.bodies.held;
    // One request has sent 800 KB of its body and holds them.
    const first = stdinBody(900_000);
    const slow = await rawRequest(daemon.url, STDIN, first, 800_000);
    await waitFor('the daemon to hold the bytes received', () => bodies() >= 800_000);
    const refused = await daemon.request('POST', STDIN, { raw: stdinBody(300_000).toString(), headers: { 'content-type': 'application/json' } });
    expect(refused).toMatchObject({
      status: 429,
      body: { error: { code: 'LIMIT_EXCEEDED', message: expect.stringMatching(/--body-budget-bytes/) as string } },
    });
    // What fits beside it passes.
    expect((await daemon.request('POST', '/v1/terminals/t_unknown0000/resize', { body: { rows: 10, cols: 10 } })).status).toBe(404);
    // The slow request ends: its body is read, answered, and its bytes given back.
    slow.socket.write(first.subarray(800_000));
    await waitFor('the slow request to be answered', () => slow.answer().includes('}'));
    expect(slow.answer()).toMatch(/^HTTP\/1\.1 404 /);
    slow.socket.destroy();
    await waitFor('the budget to be free', () => bodies() === 0);
    expect((await daemon.request('POST', STDIN, { raw: stdinBody(300_000).toString(), headers: { 'content-type': 'application/json' } })).status).toBe(404);
  });
});

describe('a flood of 40 bodies of 30 MiB at once', () => {
  test("keeps the daemon's memory near its body budget (figures printed)", async ({ spawnDaemon }) => {
    // A process of its own, so that its peak RSS is the daemon's alone.
    const flooded = await spawnDaemon();
    const body = stdinBody(30 * MiB);
    const before = flooded.peakRssKiB();
    const statuses = await Promise.all(
      Array.from(
        { length: 40 },
        () =>
          new Promise<number>((resolve, reject) => {
            const sent = request(
              `${flooded.url}${STDIN}`,
              {
                method: 'POST',
                agent: false,
                headers: { authorization: `Bearer ${flooded.token}`, 'content-type': 'application/json', 'content-length': body.length },
              },
              (response) => {
                response.resume();
                response.once('end', () => resolve(response.statusCode!));
              },
            );
            // A refused request's connection is closed before its body is all sent.
            sent.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? resolve(0) : reject(error)));
            sent.end(body);
          }),
      ),
    );
    const grewMiB = (flooded.peakRssKiB() - before) / 1024;
    const counts = statuses.reduce<Record<number, number>>((tally, status) => ({ ...tally, [status]: (tally[status] ?? 0) + 1 }), {});
    console.log(
      `40 bodies of 30 MiB at once: daemon peak RSS ${(before / 1024).toFixed(0)} MiB before, +${grewMiB.toFixed(0)} MiB under the flood; answers ${JSON.stringify(counts)}`,
    );
    expect(statuses.every((status) => [400, 429, 0].includes(status))).toBe(true);
    expect(grewMiB).toBeLessThan(768);
  }, 300_000);
});
