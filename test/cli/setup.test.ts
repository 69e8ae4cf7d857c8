/**
 * Setting up the daemon and reaching it, as a newcomer does: a daemon with
 * its own certificate reached with --ca (or NODE_EXTRA_CA_CERTS), a token
 * directory the daemon cannot write, the help of serve, and `npm start`.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { serveFrom, DAEMON_NODE_FLAGS } from '../helpers/daemon-process.ts';
import { BIN, cliEnv, runCli } from '../helpers/cli.ts';
import { canMakeUsers, osUsers } from '../helpers/os-users.ts';
import { selfSignedCertificate } from '../helpers/tls.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let cert: string;
// The file's daemon serves TLS with a certificate of its own, made when it starts.
const test = daemonTest(() => {
  const pair = selfSignedCertificate();
  cert = pair.cert;
  return [{ tlsCert: pair.cert, tlsKey: pair.key }];
});

describe('a daemon with its own certificate', () => {
  let daemon: TestDaemon;
  let env: NodeJS.ProcessEnv;

  test.beforeAll(({ daemon: fileDaemon }) => {
    daemon = fileDaemon;
    env = cliEnv(daemon.url, ALICE);
    delete env.NODE_EXTRA_CA_CERTS;
    delete env.EXECWORLD_CA;
  });

  test('is refused in one line that says to pass --ca', async () => {
    expect(daemon.url).toMatch(/^https:/);
    const result = await runCli(['ps'], { env });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^execworld: CONNECTION_FAILED: the daemon's TLS certificate is not trusted .*with --ca <file> \(or NODE_EXTRA_CA_CERTS=<file>\)\n$/,
    );
  });

  test('is reached with --ca <file>, before the command or among its options, or $EXECWORLD_CA', async () => {
    expect(await runCli(['exec', '--ca', cert, 'echo', 'over TLS'], { env })).toMatchObject({ code: 0, stdout: 'over TLS\n', stderr: '' });
    expect(await runCli(['--ca', cert, 'run', 'echo "in a shell"'], { env })).toMatchObject({ code: 0, stdout: 'in a shell\n' });
    expect(await runCli(['ps'], { env: { ...env, EXECWORLD_CA: cert } })).toMatchObject({ code: 0, stderr: '' });
    const missing = join(tmpdir(), 'no-such-ca.pem');
    expect(await runCli(['ps', '--ca', missing], { env })).toMatchObject({ code: 1, stderr: `execworld: cannot read --ca ${missing} (ENOENT)\n` });
  });

  test('is reached with NODE_EXTRA_CA_CERTS, which adds to the system certificates', async () => {
    expect(await runCli(['exec', 'echo', 'trusted'], { env: { ...env, NODE_EXTRA_CA_CERTS: cert } })).toMatchObject({ code: 0, stdout: 'trusted\n' });
  });
});

describe('execworld serve', () => {
  const users = osUsers(afterAll);

  it('--help shows a <value> after each option that takes one', async () => {
    const help = await runCli(['serve', '--help'], { env: process.env });
    expect(help.code).toBe(0);
    const options = help.stdout.split('\n').filter((line) => /^ {2}--/.test(line));
    expect(options.length).toBeGreaterThan(20);
    // The one option that takes nothing: --takeover (it asks the running daemon to upgrade).
    const flags = options.filter((line) => /^ {2}--takeover /.test(line));
    expect(flags).toHaveLength(1);
    for (const line of flags) expect(line).toMatch(/^ {2}--[\w-]+ {2,}\S/);
    for (const line of options) {
      if (line.startsWith('  --help ') || flags.includes(line)) continue;
      expect(line).toMatch(/^ {2}--[\w-]+ <(value|file)> +\S/);
    }
  });

  it.skipIf(!canMakeUsers)('says in one line, without a stack trace, that it cannot write a new token where it would', async () => {
    const user = users.make();
    // A directory of root's, which the daemon's user may read but not write.
    const config = mkdtempSync(join(tmpdir(), 'execworld-config-'));
    chmodSync(config, 0o755);
    const child = spawn(
      'setpriv',
      [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--', process.execPath, ...DAEMON_NODE_FLAGS, BIN, 'serve', '--port', '0'],
      { env: { ...process.env, XDG_CONFIG_HOME: config, XDG_STATE_HOME: mkdtempSync(join(tmpdir(), 'execworld-state-')), HOME: user.home } },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(1);
    expect(stderr).toBe(
      `execworld: cannot write a new token to ${config}/execworld/token (EACCES at ${config}/execworld): make that directory writable, ` +
        'point XDG_CONFIG_HOME elsewhere, or give a token file with --token-file\n',
    );
  });

  it("started by npm start, gives the world no PATH entry of npm's script (node_modules/.bin, node-gyp-bin)", async () => {
    const home = mkdtempSync(join(tmpdir(), 'execworld-npm-start-'));
    // By hand: the daemon as `npm start` runs it, a launcher the fixtures do not start (test/lint/daemon-fixtures.test.ts lists it).
    const daemon = await serveFrom(['npm', 'start', '--', '--port', '0'], { cwd: ROOT, env: { ...process.env, XDG_CONFIG_HOME: home, XDG_STATE_HOME: home } });
    try {
      const result = await runCli(['exec', 'sh', '-c', 'echo "$PATH"'], { env: cliEnv(daemon.url, daemon.token) });
      expect(result.code, result.stderr).toBe(0);
      const entries = result.stdout.trim().split(':');
      expect(entries).toContain('/usr/bin');
      expect(entries.filter((entry) => /node_modules\/\.bin|node-gyp-bin/.test(entry))).toEqual([]);
    } finally {
      await daemon.stop();
    }
  });
});
