/**
 * A connection that fails says why: a refused connection names its host and
 * port, a certificate this client does not trust says so and how to pass its
 * CA (and `ca` then works), and a missing token names the file looked for.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { connect, ConnectionError, ExecworldError } from '@execworld/sdk';
import { selfSignedCertificate } from '../helpers/tls.ts';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

/** A port nothing listens on: one the kernel just handed out and was given back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('connect names why the daemon cannot be reached', () => {
  it('says the connection was refused, with host and port', async () => {
    const port = await closedPort();
    const error = await connect(`http://127.0.0.1:${port}`, { token: ALICE }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(ConnectionError);
    expect(error).toMatchObject({ code: 'CONNECTION_FAILED' });
    expect((error as Error).message).toBe(
      `the connection to 127.0.0.1:${port} was refused (ECONNREFUSED): no daemon listens there; is it running, and on that port?`,
    );
  });

  it('names the token file it looked for when no token is given', async () => {
    const home = mkdtempSync(join(tmpdir(), 'execworld-no-token-'));
    vi.stubEnv('XDG_CONFIG_HOME', home);
    const error = await connect('http://127.0.0.1:1').catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(ExecworldError);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((error as Error).message).toContain(join(home, 'execworld', 'token'));
    expect((error as Error).message).toMatch(/connect\(url, \{ token \}\)/);
  });
});

let cert: string;
// The daemon of the suite of a certificate of its own: the certificate is made when the daemon starts, at the first test that needs it.
const tlsTest = daemonTest(() => {
  const certificate = selfSignedCertificate();
  cert = certificate.cert;
  return [{ tlsCert: cert, tlsKey: certificate.key }];
});

describe('a daemon with its own certificate', () => {
  let secure: TestDaemon;
  tlsTest.beforeAll(({ daemon }) => {
    secure = daemon;
  });

  tlsTest('says the certificate is not trusted and how to pass a CA', async () => {
    const error = await connect(secure.url, { token: ALICE }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(ConnectionError);
    expect((error as Error).message).toMatch(/^the daemon's TLS certificate is not trusted by this client \(DEPTH_ZERO_SELF_SIGNED_CERT: /);
    expect((error as Error).message).toContain("connect(url, { ca: readFileSync('ca.pem') })");
  });

  tlsTest('connects with the certificate given as ca, over HTTPS and WSS', async () => {
    const runtime = await connect(secure.url, { token: ALICE, ca: readFileSync(cert) });
    const handle = runtime.spawn({
      argv: ['/bin/echo', 'over tls'],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: { maxBytes: 1000 }, stderr: 'pipe' },
      graceMs: 500,
    });
    await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
    expect(handle.collected.stdout!.readFrom(0).text).toBe('over tls\n');
    await runtime.dispose();
  });

  tlsTest('says there is no TLS where an https URL meets a plain daemon', async ({ startDaemon }) => {
    const plain = await startDaemon();
    const error = await connect(plain.url.replace('http:', 'https:'), { token: ALICE }).catch((failure: unknown) => failure);
    expect((error as Error).message).toMatch(/^no TLS at 127\.0\.0\.1:\d+ \(EPROTO\): if the daemon serves plain HTTP, use an http:\/\/ URL$/);
  });
});
