/**
 * Bad input never yields a 5xx, a hang or a dead daemon: properties over
 * random bodies and queries for every operation, and hand-picked nasties.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, OPERATION_LIST } from '@execworld/sdk/protocol';
import { TestSocket, ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

let daemon: TestDaemon;
const test = daemonTest({ maxBodyBytes: 64 * 1024 });

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

const TERMINAL = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 };
const PROCESS = { argv: ['/bin/true'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: { maxBytes: 100 } }, graceMs: 500 };
const concrete = (path: string, id: string): string => path.replace('{id}', id).replace('{stream}', 'stdout');

async function expectAlive(): Promise<void> {
  expect((await daemon.request('GET', '/v1/health', { token: null })).status).toBe(200);
}

describe('bad input: properties', () => {
  test('answers every operation with random bodies and queries with a 2xx or 4xx, never a 5xx', async () => {
    // Ended sessions, so that a valid long poll (done without a timeout) answers at once.
    const terminal = await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['/bin/sh', '-c', 'echo x'] } });
    const process = await daemon.request('POST', '/v1/processes', { body: PROCESS });
    await daemon.request('GET', `/v1/terminals/${terminal.body.id}/done`);
    await daemon.request('POST', `/v1/processes/${process.body.id}/wait`, { body: { timeoutMs: 5000 } });
    const ids = [terminal.body.id as string, process.body.id as string, 't_missing00000', 'p_missing00000'];
    const routes = OPERATION_LIST.filter(
      (spec) => spec.auth && !spec.name.endsWith('.create') && !spec.name.endsWith('.delete') && !spec.name.endsWith('.terminate'),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.constantFrom(...ids),
        fc.jsonValue(),
        fc.dictionary(fc.string(), fc.string()),
        async (spec, id, body, query) => {
          const path = concrete(spec.path, id);
          const response =
            spec.method === 'GET'
              ? await daemon.request('GET', `${path}?${new URLSearchParams(query).toString()}`)
              : await daemon.request(spec.method, path, { body });
          expect(response.status, `${spec.name} → ${JSON.stringify(response.body)}`).toBeLessThan(500);
          if (response.status >= 400) expect(ERROR_CODES).toContain(response.body.error.code);
        },
      ),
      { numRuns: 300 },
    );
    await expectAlive();
  });

  test('answers a create body with one field replaced by anything with a 2xx or 4xx', async () => {
    const fields = ['argv', 'cwd', 'env', 'rows', 'cols', 'graceMs'] as const;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...fields), fc.jsonValue(), async (field, value) => {
        const response = await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, [field]: value } });
        expect(response.status, JSON.stringify(response.body)).toBeLessThan(500);
        if (response.status === 201) await daemon.request('DELETE', `/v1/terminals/${response.body.id}`);
        else expect(response.body.error.message.length).toBeGreaterThan(0);
      }),
      { numRuns: 150 },
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('argv', 'cwd', 'env', 'stdio', 'graceMs'), fc.jsonValue(), async (field, value) => {
        const response = await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, [field]: value } });
        expect(response.status, JSON.stringify(response.body)).toBeLessThan(500);
      }),
      { numRuns: 150 },
    );
    await expectAlive();
  });
});

describe('bad input: nasties', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['an empty argv', { ...TERMINAL, argv: [] }, /argv/],
    ['an empty program', { ...TERMINAL, argv: [''] }, /argv/],
    ['a NUL in argv', { ...TERMINAL, argv: ['/bin/sh', 'a\0b'] }, /NUL/],
    ['a NUL in cwd', { ...TERMINAL, cwd: '/tmp\0/x' }, /NUL/],
    ['a NUL in an env value', { ...TERMINAL, env: { A: 'x\0y' } }, /NUL/],
    ['an = in an env name', { ...TERMINAL, env: { 'A=B': 'x' } }, /env/],
    ['negative rows', { ...TERMINAL, rows: -1 }, /rows/],
    ['zero cols', { ...TERMINAL, cols: 0 }, /cols/],
    ['huge cols', { ...TERMINAL, cols: 1e9 }, /cols/],
    ['fractional rows', { ...TERMINAL, rows: 1.5 }, /rows/],
    ['rows as a string', { ...TERMINAL, rows: '24' }, /rows/],
    ['a negative grace', { ...TERMINAL, graceMs: -5 }, /graceMs/],
    ['an infinite grace', { ...TERMINAL, graceMs: 2 ** 31 }, /graceMs/],
    ['an unknown field', { ...TERMINAL, shell: true }, /unknown field\(s\) shell/],
  ])('refuses a terminal with %s, naming the field', async (_name, body, message) => {
    const response = await daemon.request('POST', '/v1/terminals', { body });
    expect(response.status).toBe(400);
    expect(response.body.error).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(message) });
  });

  test("refuses 'inherit' for a remote process, saying why", async () => {
    const response = await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, stdio: { stdin: 'ignore', stdout: 'inherit', stderr: 'pipe' } } });
    expect(response.status).toBe(400);
    expect(response.body.error.message).toMatch(/inherit/);
  });

  test('answers a missing cwd, also through .., and a missing program with 422', async () => {
    const cwd = await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, cwd: '/tmp/../definitely/missing' } });
    expect(cwd.status).toBe(422);
    expect(cwd.body.error.code).toBe('CWD_NOT_FOUND');
    const program = await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['../../no/such/program'] } });
    expect(program.status).toBe(422);
    expect(program.body.error.code).toBe('EXECUTABLE_NOT_FOUND');
  });

  test('answers ids with .. like unknown ids, with 404', async () => {
    expect((await daemon.request('GET', '/v1/terminals/..%2F..%2Fetc')).body.error.code).toBe('NOT_FOUND');
    expect((await daemon.request('GET', '/v1/terminals/../processes')).status).toBeLessThan(500);
    const unknown = await daemon.request('GET', '/v1/terminals/t_unknown0000');
    expect(unknown.status).toBe(404);
  });

  test('answers a body over the limit with 413, a non-JSON body with 415 or 400', async () => {
    const huge = await daemon.request('POST', '/v1/terminals', {
      raw: JSON.stringify({ ...TERMINAL, env: { BIG: 'x'.repeat(100 * 1024) } }),
      headers: { 'content-type': 'application/json' },
    });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    const text = await daemon.request('POST', '/v1/terminals', { raw: 'argv=/bin/sh', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
    const broken = await daemon.request('POST', '/v1/terminals', { raw: '{"argv": [', headers: { 'content-type': 'application/json' } });
    expect(broken.status).toBe(400);
    expect(broken.body.error.message).toMatch(/not valid JSON/);
    for (const body of [[1, 2], 'text', 42, null]) {
      expect((await daemon.request('POST', '/v1/terminals', { body })).status).toBe(400);
    }
  });

  test('refuses bad queries, unknown signals, and acts on an exited terminal with 409', async () => {
    const created = await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['/bin/sh', '-c', 'exit 0'] } });
    const id = created.body.id as string;
    await daemon.request('GET', `/v1/terminals/${id}/done?timeoutMs=5000`);
    for (const query of ['from=-1', 'from=abc', 'waitMs=999999', 'maxBytes=0', 'from=1.5', 'bogus=1']) {
      const response = await daemon.request('GET', `/v1/terminals/${id}/output?${query}`);
      expect(response.status, query).toBe(400);
    }
    expect((await daemon.request('GET', `/v1/terminals/${id}/output?from=999999`)).status).toBe(400);
    const signal = await daemon.request('POST', `/v1/terminals/${id}/signal`, { body: { signal: 'SIGBOGUS' } });
    expect(signal.status).toBe(400);
    expect(signal.body.error.message).toMatch(/SIGINT/);
    const input = await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'x' } });
    expect(input.status).toBe(409);
    expect(input.body.error.code).toBe('TERMINAL_EXITED');
    expect((await daemon.request('POST', `/v1/terminals/${id}/resize`, { body: { rows: 10, cols: 10 } })).status).toBe(409);
  });

  test('refuses SIGKILL to a shell and stdin writes to a process without a stdin pipe', async () => {
    const shell = await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['/bin/sh'] } });
    const refused = await daemon.request('POST', `/v1/terminals/${shell.body.id}/signal`, { body: { signal: 'SIGKILL' } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('SIGNAL_REFUSED');
    const process = await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, argv: ['/bin/sleep', '5'] } });
    const stdin = await daemon.request('POST', `/v1/processes/${process.body.id}/stdin`, { body: { data: 'x' } });
    expect(stdin.status).toBe(409);
    expect(stdin.body.error.code).toBe('PROCESS_EXITED');
    expect((await daemon.request('GET', `/v1/processes/${process.body.id}/collected/stdout?from=0`)).body.error.code).toBe('STREAM_NOT_AVAILABLE');
    await daemon.request('DELETE', `/v1/terminals/${shell.body.id}`);
    await daemon.request('DELETE', `/v1/processes/${process.body.id}`);
  });

  test('keeps a WebSocket open through garbage, answering each message with an error', async () => {
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    socket.socket.send('not json');
    socket.socket.send(Buffer.from([1, 2, 3]));
    socket.send({ t: 'call', id: 7, op: 'no.such.op' });
    socket.send({ t: 'call', id: 8, op: 'terminal.create', params: { argv: 'nope' } });
    socket.send({ t: 'bogus' });
    await socket.until('five errors', () => socket.messages.filter((m) => m.t === 'error').length >= 5 || undefined);
    const errors = socket.messages.filter((m) => m.t === 'error') as { id: number | null; error: { code: string; message: string } }[];
    // Binary messages are port forwards' write frames: garbage is bad input, never a fault of the daemon.
    expect(errors.find((e) => e.error.message.includes('write frame'))?.error.code).toBe('INVALID_ARGUMENT');
    expect(errors.find((e) => e.id === 7)?.error.code).toBe('NOT_FOUND');
    expect(errors.find((e) => e.id === 8)?.error.code).toBe('INVALID_ARGUMENT');
    await expect(socket.call('terminal.list')).resolves.toMatchObject({ terminals: expect.any(Array) });
    socket.close();
  });
});
