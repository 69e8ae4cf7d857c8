/**
 * Two daemons behind a proxy that behaves as the Kubernetes agent-sandbox
 * router (test/helpers/sandbox-router.ts): routed by X-Sandbox-ID, with
 * Authorization and upgrade Origins stripped. The SDK, the CLI and a resume
 * across cuts work through it, with the token in X-Execworld-Token (or the
 * WebSocket subprotocol).
 */
import { afterEach, describe, expect } from 'vitest';
import { WebSocket } from 'ws';
import { connect, sandboxRouter } from '@execworld/sdk';
import { TOKEN_HEADER, WS_SUBPROTOCOL, WS_TOKEN_PROTOCOL_PREFIX } from '@execworld/sdk/protocol';
import { runCli } from '../helpers/cli.ts';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { cutRandomly } from '../helpers/proxy.ts';
import { SandboxRouter } from '../helpers/sandbox-router.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonTest();
let one: TestDaemon;
let two: TestDaemon;
let router: SandboxRouter;
// Two sandboxes behind a router, each test's own: the test's daemons are closed after afterEach has closed the router.
test.beforeEach(async ({ startDaemon }) => {
  [one, two] = await Promise.all([startDaemon(), startDaemon()]);
  router = await SandboxRouter.start({ one: Number(new URL(one.url).port), two: Number(new URL(two.url).port) });
});
afterEach(async () => {
  await router?.close();
});

const fast = { reconnectInitialDelayMs: 5, reconnectMaxDelayMs: 50, heartbeatMs: 500 };

describe('through an agent-sandbox router', () => {
  test('reaches the daemon each sandbox id names, with the token in X-Execworld-Token', async () => {
    const first = await connect(router.url, { token: ALICE, ...sandboxRouter('one') });
    const second = await connect(router.url, { token: ALICE, ...sandboxRouter('two') });
    const handle = first.spawn({ argv: ['sleep', '30'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 });
    await handle.started;
    const listed = async (runtime: typeof first): Promise<number> => (await runtime.call('process.list', {})).processes.length;
    expect(await listed(first)).toBe(1);
    expect(await listed(second)).toBe(0);
    // The router saw the routing headers and no Authorization reached past it.
    const seen = router.seen.filter((request) => request.headers['x-sandbox-id'] === 'one');
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((request) => request.headers[TOKEN_HEADER] === ALICE && request.headers['x-sandbox-port'] === '8888')).toBe(true);
    handle.terminate();
    await handle.done;
    await Promise.all([first.dispose(), second.dispose()]);
  });

  test('refuses a token sent in Authorization, which the router strips, and an unknown sandbox', async () => {
    await expect(connect(router.url, { token: ALICE, headers: { 'X-Sandbox-ID': 'one' } })).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(connect(router.url, { token: ALICE, ...sandboxRouter('three') })).rejects.toMatchObject({ code: 'CONNECTION_FAILED' });
  });

  test('takes the token in the WebSocket subprotocol, with the Origin stripped', async () => {
    const socket = new WebSocket(
      `${router.url.replace('http', 'ws')}/v1/connect`,
      [WS_SUBPROTOCOL, `${WS_TOKEN_PROTOCOL_PREFIX}${Buffer.from(ALICE).toString('base64url')}`],
      {
        headers: { 'X-Sandbox-ID': 'two', origin: 'https://elsewhere.example' },
      },
    );
    await new Promise<void>((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    expect(socket.protocol).toBe(WS_SUBPROTOCOL);
    socket.close();
  });

  test('serves the CLI with --sandbox', async () => {
    const env = { ...process.env, EXECWORLD_URL: router.url, EXECWORLD_TOKEN: ALICE };
    const result = await runCli(['--sandbox', 'one', 'exec', '--', 'sh', '-c', 'echo through the router'], { env });
    expect(result).toMatchObject({ code: 0, stdout: 'through the router\n' });
    const viaEnvironment = await runCli(['ps'], { env: { ...env, EXECWORLD_SANDBOX: 'two' } });
    expect(viaEnvironment.code).toBe(0);
  });

  test('resumes a terminal byte-exact across cuts of the routed connection', async () => {
    const runtime = await connect(router.url, { token: ALICE, ...sandboxRouter('one'), ...fast });
    const terminal = await runtime.spawnTerminal({
      argv: ['/bin/sh', '-c', 'stty -echo; echo READY; read a; echo "got $a"; seq 1 50000; read b; seq 50001 100000'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 1000,
    });
    const chunks: Buffer[] = [];
    const text = (): string => Buffer.concat(chunks).toString();
    terminal.output.on('data', (chunk: Buffer) => chunks.push(chunk));
    await waitFor('the program', () => text().includes('READY'));
    // Input sent across a cut, and output that stops mid-way across another, then random cuts to the end.
    router.cut();
    await terminal.write('across\r');
    await waitFor('the first half', () => text().endsWith('\r\n50000\r\n'));
    router.cut();
    await terminal.write('\r');
    await Promise.all([cutRandomly(router, terminal.done), terminal.done]);
    const expected = `READY\r\ngot across\r\n${Array.from({ length: 100_000 }, (_, index) => `${index + 1}\r\n`).join('')}`;
    expect(text()).toBe(expected);
    await runtime.dispose();
  });
});

describe('the headers the SDK sends', () => {
  test('refuses headers it sets itself, names that are not names, and values that could split a request', async () => {
    const refused = (options: Parameters<typeof connect>[1]): Promise<unknown> => connect('http://127.0.0.1:1', { token: ALICE, ...options });
    await expect(refused({ headers: { Authorization: 'Bearer x' } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'options.headers: Authorization is set by the SDK itself',
    });
    await expect(refused({ headers: { 'X-Execworld-Token': 'x' } })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(refused({ headers: { 'Sec-WebSocket-Protocol': 'x' } })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(refused({ headers: { 'bad name': 'x' } })).rejects.toMatchObject({ message: 'options.headers: "bad name" is not a header name' });
    await expect(refused({ headers: { 'X-Sandbox-ID': 'a\r\nX-Evil: 1' } })).rejects.toMatchObject({
      message: 'options.headers.X-Sandbox-ID must be a string without line breaks or NUL',
    });
    await expect(refused({ tokenHeader: 'cookie' as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(() => sandboxRouter('')).toThrow('sandboxId must be a non-empty string');
    expect(() => sandboxRouter('x', 0)).toThrow('port must be an integer from 1 to 65535, got 0');
    expect(sandboxRouter('s-1', 9000)).toEqual({ headers: { 'X-Sandbox-ID': 's-1', 'X-Sandbox-Port': '9000' }, tokenHeader: 'x-execworld-token' });
  });
});
