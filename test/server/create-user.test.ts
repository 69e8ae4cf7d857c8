/**
 * A create's `user` (docker's `-u`): the program runs as the OS user it
 * names, where its owner may. An owner mapped to an OS user (the token file's
 * user=) may name only that user; an owner that is not runs as the daemon's
 * user and may name another only when the daemon is root; an unknown user is
 * a 400. Over REST (process, terminal, shell, POST /v1/run), the SDK and the
 * CLI, against real OS users made here and a root daemon (a non-root one in
 * its own process), with the program's files, children and cleanup checked.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { AuthError, connect, InvalidRequestError } from '@execworld/sdk';
import { LocalRuntime } from '../../service/src/provider/local-runtime.ts';
import { cliEnv, runCli } from '../helpers/cli.ts';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { canMakeUsers, osUsers } from '../helpers/os-users.ts';
import { waitFor } from '../helpers/wait.ts';

const CAROL = 'carol-token-0123456789abcdefg';

/** The real uid of every running process, read from /proc. */
function uidsOfProcesses(): Map<number, number> {
  const uids = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const match = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${entry}/status`, 'latin1'));
      if (match !== null) uids.set(Number(entry), Number(match[1]));
    } catch (_error) {
      // It ended meanwhile.
    }
  }
  return uids;
}

const test = daemonTest();

const runsAs = (uid: number): number[] => [...uidsOfProcesses()].filter(([, owner]) => owner === uid).map(([pid]) => pid);

describe.skipIf(!canMakeUsers)('a create names the OS user its program runs as', () => {
  const users = osUsers(afterAll);
  let daemon: TestDaemon;
  /** The user the unmapped owner (alice) names. */
  let dave: ReturnType<typeof users.make>;
  /** The user carol's token file line maps her to. */
  let carol: ReturnType<typeof users.make>;
  /** A user nobody may run as but alice: nothing may ever run as erin here from carol's creates. */
  let erin: ReturnType<typeof users.make>;

  beforeAll(() => {
    dave = users.make();
    carol = users.make();
    erin = users.make();
  });
  // Each test's own daemon, closed when the test ends: before afterAll removes the users its sessions ran as.
  test.beforeEach(async ({ startDaemon }) => {
    daemon = await startDaemon({}, { owners: [{ owner: 'carol', token: CAROL, user: carol }] });
  });

  /** The stdout of a REST process once it ended with 0. */
  async function stdoutOf(id: string, token = ALICE): Promise<string> {
    const done = await daemon.request('GET', `/v1/processes/${id}/done?timeoutMs=20000`, { token });
    expect(done.body.exit, JSON.stringify(done.body)).toEqual({ exitCode: 0, signal: null });
    const read = await daemon.request('GET', `/v1/processes/${id}/output/stdout?from=0&waitMs=5000`, { token });
    return Buffer.from(read.body.data as string, 'base64').toString();
  }

  describe('an owner not mapped to an OS user, of a root daemon', () => {
    test("REST: a process named by user name or uid runs as that user, in that user's home", async () => {
      for (const user of [dave.name, String(dave.uid)]) {
        const created = await daemon.request('POST', '/v1/processes', {
          body: { argv: ['/bin/sh', '-c', 'id -u; id -g; id -G; pwd; echo "$HOME $USER"'], user, stdio: { stdin: 'ignore' } },
        });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        expect(created.body.cwd).toBe(dave.home);
        expect(await stdoutOf(created.body.id)).toBe(`${dave.uid}\n${dave.gid}\n${dave.gid}\n${dave.home}\n${dave.home} ${dave.name}\n`);
      }
    });

    test('REST: POST /v1/run, a terminal and a shell run as the named user', async () => {
      const ran = await daemon.request('POST', '/v1/run', { body: { command: 'id -u; pwd', user: dave.name } });
      expect(ran.status, JSON.stringify(ran.body)).toBe(200);
      expect(ran.body).toMatchObject({ exitCode: 0, stdout: `${dave.uid}\n${dave.home}\n` });

      const terminal = await daemon.request('POST', '/v1/terminals', { body: { argv: ['/bin/sh', '-c', 'id -u'], rows: 24, cols: 80, user: dave.name } });
      expect(terminal.status, JSON.stringify(terminal.body)).toBe(201);
      expect(terminal.body.cwd).toBe(dave.home);
      const done = await daemon.request('GET', `/v1/terminals/${terminal.body.id}/done?timeoutMs=20000`);
      expect(done.body.exit).toEqual({ exitCode: 0, signal: null });
      const read = await daemon.request('GET', `/v1/terminals/${terminal.body.id}/output?from=0`);
      expect(Buffer.from(read.body.data as string, 'base64').toString()).toBe(`${dave.uid}\r\n`);

      const shell = await daemon.request('POST', '/v1/shells', { body: { user: String(dave.uid) } });
      expect(shell.status, JSON.stringify(shell.body)).toBe(201);
      try {
        const inShell = await daemon.request('POST', `/v1/shells/${shell.body.id}/run`, { body: { command: 'id -u; pwd' } });
        expect(inShell.body).toMatchObject({ exitCode: 0, output: `${dave.uid}\n${dave.home}\n` });
      } finally {
        await daemon.request('DELETE', `/v1/shells/${shell.body.id}`);
      }
    });

    test("the program's files and children are the user's, and its session ends them all", async () => {
      const created = await daemon.request('POST', '/v1/processes', {
        body: { argv: ['/bin/sh', '-c', 'echo made > owned.txt; sleep 300 & echo $!; wait'], user: dave.name, stdio: { stdin: 'ignore' } },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      let child = 0;
      await waitFor('the child pid', async () => {
        const read = await daemon.request('GET', `/v1/processes/${created.body.id}/output/stdout?from=0`);
        child = Number.parseInt(Buffer.from(read.body.data as string, 'base64').toString(), 10);
        return child > 0;
      });
      const file = statSync(join(dave.home, 'owned.txt'));
      expect({ uid: file.uid, gid: file.gid }).toEqual({ uid: dave.uid, gid: dave.gid });
      expect(uidsOfProcesses().get(child)).toBe(dave.uid);
      expect(uidsOfProcesses().get(created.body.pid as number)).toBe(dave.uid);
      // Listed like any other of the owner's processes, and ended with its tree.
      const listed = await daemon.request('GET', '/v1/processes');
      expect(listed.body.processes.map((process: { id: string }) => process.id)).toContain(created.body.id);
      const deleted = await daemon.request('DELETE', `/v1/processes/${created.body.id}`);
      expect(deleted.status).toBe(200);
      await waitFor('the child to be gone', () => !existsSync(`/proc/${child}`));
      expect(existsSync(`/proc/${created.body.pid as number}`)).toBe(false);
    });

    test("root or 0 is the daemon's own user: no switch, the daemon's working directory", async () => {
      for (const user of ['root', '0']) {
        const ran = await daemon.request('POST', '/v1/run', { body: { command: 'id -u; pwd', user } });
        expect(ran.status, JSON.stringify(ran.body)).toBe(200);
        expect(ran.body.stdout).toBe(`0\n${process.cwd()}\n`);
      }
    });

    test('an unknown user is a 400 naming it, on every create', async () => {
      const unknown = `nobody${process.pid}x`;
      const creates: [string, Record<string, unknown>][] = [
        ['/v1/processes', { argv: ['/bin/true'] }],
        ['/v1/terminals', { argv: ['/bin/true'], rows: 24, cols: 80 }],
        ['/v1/shells', {}],
        ['/v1/run', { command: 'true' }],
      ];
      for (const [path, body] of creates) {
        for (const user of [unknown, '4000000000']) {
          const refused = await daemon.request('POST', path, { body: { ...body, user } });
          expect(refused.status, `${path} ${user}: ${JSON.stringify(refused.body)}`).toBe(400);
          expect(refused.body.error.code).toBe('INVALID_ARGUMENT');
          expect(refused.body.error.message).toContain(`user ${user}`);
        }
      }
    });

    test('SDK: spawn, spawnTerminal and run take the user', async () => {
      const runtime = await connect(daemon.url, { token: ALICE });
      try {
        const ran = await runtime.run(['id', '-u'], { user: dave.name });
        expect(ran).toMatchObject({ exitCode: 0, stdout: `${dave.uid}\n` });
        const handle = runtime.spawn({ argv: ['/bin/sh', '-c', 'id -un'], user: String(dave.uid), stdio: { stdin: 'ignore' } });
        let out = '';
        handle.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
        await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
        await waitFor('the output', () => out.endsWith('\n'));
        expect(out).toBe(`${dave.name}\n`);
        const terminal = await runtime.spawnTerminal({ argv: ['/bin/sh', '-c', 'exit 0'], rows: 24, cols: 80, user: dave.name });
        expect((await runtime.call('terminal.get', { id: terminal.id })).cwd).toBe(dave.home);
        await terminal.done;
        await expect(runtime.run('true', { user: `nobody${process.pid}x` })).rejects.toBeInstanceOf(InvalidRequestError);
      } finally {
        await runtime.dispose();
      }
    });

    test('CLI: exec -u, run -u and shell -d -u run as the user', async () => {
      const env = cliEnv(daemon.url, ALICE);
      const exec = await runCli(['exec', '-u', dave.name, 'id', '-u'], { env });
      expect(exec, exec.stderr).toMatchObject({ code: 0, stdout: `${dave.uid}\n` });
      const long = await runCli(['exec', '--user', String(dave.uid), '--', 'sh', '-c', 'id -un; pwd'], { env });
      expect(long, long.stderr).toMatchObject({ code: 0, stdout: `${dave.name}\n${dave.home}\n` });
      const run = await runCli(['run', '-u', dave.name, 'id -u'], { env });
      expect(run, run.stderr).toMatchObject({ code: 0, stdout: `${dave.uid}\n` });
      const shell = await runCli(['shell', '-d', '-u', dave.name], { env });
      expect(shell.code, shell.stderr).toBe(0);
      const id = shell.stdout.trim();
      try {
        const info = await daemon.request('GET', `/v1/terminals/${id}`);
        expect(info.body.cwd).toBe(dave.home);
        expect(uidsOfProcesses().get(info.body.pid as number)).toBe(dave.uid);
      } finally {
        await daemon.request('DELETE', `/v1/terminals/${id}`);
      }
      const unknown = await runCli(['exec', '-u', `nobody${process.pid}x`, 'true'], { env });
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/INVALID_ARGUMENT.*nobody\d+x/);
    });
  });

  describe('an owner mapped to an OS user', () => {
    test('may name its own user, by name or uid', async () => {
      for (const user of [carol.name, String(carol.uid)]) {
        const ran = await daemon.request('POST', '/v1/run', { body: { command: 'id -u; pwd', user }, token: CAROL });
        expect(ran.status, JSON.stringify(ran.body)).toBe(200);
        expect(ran.body.stdout).toBe(`${carol.uid}\n${carol.home}\n`);
      }
      const env = cliEnv(daemon.url, CAROL);
      const exec = await runCli(['exec', '-u', carol.name, 'id', '-u'], { env });
      expect(exec, exec.stderr).toMatchObject({ code: 0, stdout: `${carol.uid}\n` });
    });

    test('naming anyone else is refused on every create, and nothing runs', async () => {
      const marker = join(erin.home, 'ran');
      const script = `touch ${marker}; touch /tmp/ew-user-${process.pid}`;
      const creates: [string, Record<string, unknown>][] = [
        ['/v1/processes', { argv: ['/bin/sh', '-c', script] }],
        ['/v1/terminals', { argv: ['/bin/sh', '-c', script], rows: 24, cols: 80 }],
        ['/v1/shells', {}],
        ['/v1/run', { command: script }],
      ];
      const forbidden = [erin.name, String(erin.uid), 'root', '0', dave.name, '00', `${carol.uid}0`];
      const malformed = [
        ' 0',
        '0 ',
        '+0',
        `+${carol.uid}`,
        `${carol.uid} `,
        `${carol.name}:${carol.name}`,
        '',
        'r'.repeat(33),
        'a'.repeat(100_000),
        'root\n',
        '-1',
        '0x0',
      ];
      for (const [path, body] of creates) {
        for (const user of forbidden) {
          const refused = await daemon.request('POST', path, { body: { ...body, user }, token: CAROL });
          expect(refused.status, `${path} ${user}: ${JSON.stringify(refused.body)}`).toBe(403);
          expect(refused.body.error.code).toBe('USER_NOT_ALLOWED');
        }
        for (const user of malformed) {
          const refused = await daemon.request('POST', path, { body: { ...body, user }, token: CAROL });
          expect(refused.status, `${path} ${JSON.stringify(user).slice(0, 40)}: ${JSON.stringify(refused.body).slice(0, 300)}`).toBe(400);
          expect(refused.body.error.code).toBe('INVALID_ARGUMENT');
        }
      }
      expect(existsSync(marker)).toBe(false);
      expect(existsSync(`/tmp/ew-user-${process.pid}`)).toBe(false);
      expect(runsAs(erin.uid)).toEqual([]);
      expect((await daemon.request('GET', '/v1/processes', { token: CAROL })).body.processes).toEqual([]);
      expect((await daemon.request('GET', '/v1/terminals', { token: CAROL })).body.terminals).toEqual([]);
      expect((await daemon.request('GET', '/v1/shells', { token: CAROL })).body.shells).toEqual([]);
    });

    test('SDK and CLI: the refusal is USER_NOT_ALLOWED', async () => {
      const runtime = await connect(daemon.url, { token: CAROL });
      try {
        const refused = runtime.run(['id', '-u'], { user: 'root' });
        await expect(refused).rejects.toBeInstanceOf(AuthError);
        await expect(refused).rejects.toMatchObject({ code: 'USER_NOT_ALLOWED' });
        await expect(runtime.spawnTerminal({ argv: ['/bin/true'], rows: 24, cols: 80, user: '0' })).rejects.toMatchObject({ code: 'USER_NOT_ALLOWED' });
      } finally {
        await runtime.dispose();
      }
      const env = cliEnv(daemon.url, CAROL);
      for (const args of [
        ['exec', '-u', 'root', 'id', '-u'],
        ['run', '-u', '0', 'id -u'],
        ['shell', '-d', '-u', erin.name],
      ]) {
        const refused = await runCli(args, { env });
        expect(refused.code, args.join(' ')).toBe(1);
        expect(refused.stdout).toBe('');
        expect(refused.stderr).toMatch(/USER_NOT_ALLOWED/);
        expect(refused.stderr.trim().split('\n')).toHaveLength(1);
      }
      expect(runsAs(erin.uid)).toEqual([]);
    });
  });

  describe('a daemon that is not root', () => {
    let frank: ReturnType<typeof users.make>;
    beforeAll(() => {
      frank = users.make();
    });

    test('runs its own user, and refuses any other', async ({ spawnDaemon }) => {
      const own = await spawnDaemon([], [], { uid: frank.uid, gid: frank.gid });
      const call = (body: unknown) =>
        fetch(`${own.url}/v1/run`, {
          method: 'POST',
          headers: { authorization: `Bearer ${own.token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then(async (response) => ({ status: response.status, body: (await response.json()) as any }));
      for (const user of [frank.name, String(frank.uid)]) {
        const ran = await call({ command: 'id -u', user });
        expect(ran.status, JSON.stringify(ran.body)).toBe(200);
        expect(ran.body.stdout).toBe(`${frank.uid}\n`);
      }
      for (const user of [dave.name, 'root', '0']) {
        const refused = await call({ command: `touch /tmp/ew-user-frank-${process.pid}`, user });
        expect(refused.status, JSON.stringify(refused.body)).toBe(403);
        expect(refused.body.error).toMatchObject({ code: 'USER_NOT_ALLOWED', message: expect.stringContaining('not root') });
      }
      expect(existsSync(`/tmp/ew-user-frank-${process.pid}`)).toBe(false);
    });
  });
});

describe('a local runtime', () => {
  test("runs programs as its own process's user only", async () => {
    const runtime = new LocalRuntime();
    try {
      const own = [userInfo().username, ...(process.getuid === undefined ? [] : [String(process.getuid())])];
      for (const user of own) {
        const ran = await runtime.run(['id', '-u'], { user });
        expect(ran.stdout).toBe(`${process.getuid?.()}\n`);
      }
      const other = process.getuid?.() === 0 ? 'nobody' : 'root';
      expect(() => runtime.spawn({ argv: ['id'], user: other })).toThrow(new RegExp(`user ${other}: a local runtime runs programs as its own process's user`));
      await expect(runtime.spawnTerminal({ argv: ['id'], rows: 24, cols: 80, user: other })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(runtime.run('id', { user: other })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await runtime.dispose();
    }
  });
});
