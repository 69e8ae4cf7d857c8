/**
 * What a create leaves out, the world fills in: a process, terminal or shell
 * created without a working directory runs in the owner's home when the owner
 * is mapped to an OS user, else in the daemon's --default-cwd, else in the
 * daemon's own working directory; stdio entries left out are pipes and the
 * grace is 5 s. Over REST, through the SDK, and from the CLI run in a
 * directory that exists only on the client's machine.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect } from 'vitest';
import { connect } from '@execworld/sdk';
import { DEFAULT_GRACE_MS } from '@execworld/sdk/seam';
import { serveConfig } from '../../service/src/cli/serve.ts';
import { BIN, cliEnv } from '../helpers/cli.ts';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { canMakeUsers, makeUser } from '../helpers/os-users.ts';
import { waitFor } from '../helpers/wait.ts';

const CAROL = 'carol-token-0123456789abcdefg';

let daemon: TestDaemon;
let carol: ReturnType<typeof makeUser> | undefined;

const test = daemonTest(() => [{}, { owners: carol === undefined ? [] : [{ owner: 'carol', token: CAROL, user: carol }] }]);

test.beforeAll(() => {
  carol = canMakeUsers ? makeUser() : undefined;
});
test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});
test.afterAll(() => {
  carol?.remove();
});

/** The stdout of a REST process, once it ended. */
async function stdoutOf(target: TestDaemon, id: string, token = ALICE): Promise<string> {
  const done = await target.request('GET', `/v1/processes/${id}/done?timeoutMs=20000`, { token });
  expect(done.body.exit).toEqual({ exitCode: 0, signal: null });
  const read = await target.request('GET', `/v1/processes/${id}/output/stdout?from=0&waitMs=5000`, { token });
  return Buffer.from(read.body.data as string, 'base64').toString();
}

describe('creates without a working directory, stdio or grace', () => {
  test("REST: a process with only argv runs with pipes in the daemon's working directory", async () => {
    const created = await daemon.request('POST', '/v1/processes', { body: { argv: ['/bin/pwd'] } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ cwd: process.cwd(), stdin: 'pipe', stdout: { mode: 'pipe' }, stderr: { mode: 'pipe' } });
    expect(await stdoutOf(daemon, created.body.id)).toBe(`${process.cwd()}\n`);
  });

  test('REST: one stdio entry given, the others are pipes', async () => {
    const created = await daemon.request('POST', '/v1/processes', { body: { argv: ['/bin/true'], stdio: { stdout: { maxBytes: 64 } } } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ stdin: 'pipe', stdout: { mode: 'collect' }, stderr: { mode: 'pipe' } });
  });

  test("REST: a terminal with only argv and a size runs in the daemon's working directory", async () => {
    const created = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/sh', '-c', 'pwd'], rows: 24, cols: 80 } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.cwd).toBe(process.cwd());
    const done = await daemon.request('GET', `/v1/terminals/${created.body.id}/done?timeoutMs=20000`);
    expect(done.body.exit).toEqual({ exitCode: 0, signal: null });
    const read = await daemon.request('GET', `/v1/terminals/${created.body.id}/output?from=0`);
    expect(Buffer.from(read.body.data as string, 'base64').toString()).toBe(`${process.cwd()}\r\n`);
  });

  test("REST: a shell without a cwd starts in the daemon's working directory", async () => {
    const created = await daemon.request('POST', '/v1/shells', { body: {} });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const ran = await daemon.request('POST', `/v1/shells/${created.body.id}/run`, { body: { command: 'pwd' } });
    expect(ran.body.output).toBe(`${process.cwd()}\n`);
    await daemon.request('DELETE', `/v1/shells/${created.body.id}`);
  });

  test('REST: --default-cwd sets the directory of an unmapped owner', async ({ startDaemon }) => {
    const directory = realpathSync(mkdtempSync(join(tmpdir(), 'ew-default-cwd-')));
    const other = await startDaemon({ defaultCwd: directory });
    const created = await other.request('POST', '/v1/processes', { body: { argv: ['/bin/pwd'] } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(await stdoutOf(other, created.body.id)).toBe(`${directory}\n`);
  });

  test('--default-cwd must be a directory', () => {
    expect(() => serveConfig(['--default-cwd', '/definitely/missing'])).toThrow(/--default-cwd: \/definitely\/missing is not a directory/);
    expect(serveConfig(['--default-cwd', tmpdir()]).config.defaultCwd).toBe(tmpdir());
  });

  test(`SDK: a spawn with only argv runs with pipes and a grace of ${DEFAULT_GRACE_MS} ms in the daemon's working directory`, async () => {
    const runtime = await connect(daemon.url, { token: ALICE });
    try {
      const handle = runtime.spawn({ argv: ['/bin/pwd'] });
      let out = '';
      handle.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
      handle.stdin!.end();
      await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
      await waitFor('the output', () => out.length > 0);
      expect(out).toBe(`${process.cwd()}\n`);
      const terminal = await runtime.spawnTerminal({ argv: ['/bin/sh', '-c', 'exit 0'], rows: 24, cols: 80 });
      expect((await runtime.call('terminal.get', { id: terminal.id })).cwd).toBe(process.cwd());
      await terminal.terminate();
    } finally {
      await runtime.dispose();
    }
  });

  describe.skipIf(!canMakeUsers)('an owner mapped to an OS user', () => {
    test('SDK: a spawn with only argv runs in the home of the owner’s user, as that user', async () => {
      const runtime = await connect(daemon.url, { token: CAROL });
      try {
        const handle = runtime.spawn({ argv: ['/bin/sh', '-c', 'pwd; id -un'], stdio: { stdin: 'ignore' } });
        let out = '';
        handle.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
        await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
        await waitFor('the output', () => out.split('\n').length > 2);
        expect(out).toBe(`${carol!.home}\n${carol!.name}\n`);
      } finally {
        await runtime.dispose();
      }
    });

    test('REST: a terminal and a shell without a cwd start in that home', async () => {
      const terminal = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/true'], rows: 24, cols: 80 }, token: CAROL });
      expect(terminal.status, JSON.stringify(terminal.body)).toBe(201);
      expect(terminal.body.cwd).toBe(carol!.home);
      const shell = await daemon.request('POST', '/v1/shells', { body: {}, token: CAROL });
      expect(shell.status, JSON.stringify(shell.body)).toBe(201);
      expect(shell.body.cwd).toBe(carol!.home);
      await daemon.request('DELETE', `/v1/shells/${shell.body.id}`, { token: CAROL });
    });
  });

  // A directory only the client has: a tmpfs mounted in a mount namespace of the CLI's own, which the daemon's world never sees.
  describe.skipIf(!canMakeUsers)('the CLI, run in a directory that exists only on the client', () => {
    test("exec and run leave the working directory to the world: the daemon's default", async ({ startDaemon }) => {
      const directory = realpathSync(mkdtempSync(join(tmpdir(), 'ew-default-cwd-')));
      const other = await startDaemon({ defaultCwd: directory });
      const mountpoint = mkdtempSync(join(tmpdir(), 'ew-client-only-'));
      mkdirSync(mountpoint, { recursive: true });
      const env = cliEnv(other.url, ALICE);
      // Asynchronously: the daemon answers from this process.
      const client = async (args: string[]): Promise<string> =>
        (
          await promisify(execFile)(
            'unshare',
            ['--mount', '/bin/sh', '-c', `mount -t tmpfs none "$0" && mkdir "$0/only-here" && cd "$0/only-here" && exec "$@"`, mountpoint, BIN, ...args],
            { env, encoding: 'utf8', timeout: 60_000 },
          )
        ).stdout;
      expect(await client(['exec', '--', '/bin/pwd'])).toBe(`${directory}\n`);
      expect(await client(['run', 'pwd'])).toBe(`${directory}\n`);
    });
  });
});
