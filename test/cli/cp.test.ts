/**
 * `execworld cp` as a person runs it: files and directories both ways, into
 * an existing directory, relative to a session's working directory, its
 * errors and usage errors with their exit status, and the progress bar on a
 * real terminal (tmux; with CI set a missing tmux fails that test).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { cliEnv, runCli, Tmux, tmuxUnavailable } from '../helpers/cli.ts';

const skipTerminal = tmuxUnavailable !== undefined && process.env.CI === undefined;
const scratch = mkdtempSync(join(tmpdir(), 'cp-'));
/** This machine's side, and the world's (the same host here, in another directory). */
const here = join(scratch, 'here');
const world = join(scratch, 'world');
mkdirSync(here);
mkdirSync(world);

let daemon: TestDaemon;
let env: NodeJS.ProcessEnv;
const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  env = cliEnv(daemon.url, ALICE);
});
test.afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

const cp = (...args: string[]) => runCli(['cp', ...args], { env, cwd: here });

describe('execworld cp', () => {
  test('copies a file up into a directory and back, keeping its mode', async () => {
    writeFileSync(join(here, 'script.sh'), '#!/bin/sh\necho hi\n', { mode: 0o750 });
    const up = await cp('script.sh', `:${world}`);
    expect(up, up.stderr).toMatchObject({ code: 0 });
    expect(readFileSync(join(world, 'script.sh'), 'utf8')).toBe('#!/bin/sh\necho hi\n');
    expect(statSync(join(world, 'script.sh')).mode & 0o777).toBe(0o750);
    const down = await cp(`:${join(world, 'script.sh')}`, 'back.sh');
    expect(down, down.stderr).toMatchObject({ code: 0 });
    expect(readFileSync(join(here, 'back.sh'), 'utf8')).toBe('#!/bin/sh\necho hi\n');
    // No progress bar where stderr is not a terminal.
    expect(up.stderr + down.stderr).toBe('');
  });

  test('copies a directory with -r both ways, and refuses one without', async () => {
    const tree = join(here, 'tree');
    mkdirSync(join(tree, 'empty'), { recursive: true });
    writeFileSync(join(tree, 'a.txt'), 'a\n');
    symlinkSync('a.txt', join(tree, 'link'));
    const refused = await cp('tree', `:${world}`);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('is a directory (copy it with -r)');
    expect((await cp('-r', 'tree', `:${world}`)).code).toBe(0);
    expect(readdirSync(join(world, 'tree')).sort()).toEqual(['a.txt', 'empty', 'link']);
    expect((await cp('-r', `:${join(world, 'tree')}`, 'tree-back')).code).toBe(0);
    expect(readdirSync(join(here, 'tree-back')).sort()).toEqual(['a.txt', 'empty', 'link']);
  });

  test('leaves special files out of a directory either way, naming each on stderr, and copies the rest', async () => {
    const tree = join(here, 'specials');
    mkdirSync(tree);
    writeFileSync(join(tree, 'kept.txt'), 'kept\n');
    execFileSync('mkfifo', [join(tree, 'pipe')]);
    const up = await cp('-r', 'specials', `:${world}`);
    expect(up, up.stderr).toMatchObject({ code: 0 });
    expect(up.stderr).toBe('execworld cp: pipe: not copied: a fifo (only files, directories and links are)\n');
    expect(readdirSync(join(world, 'specials'))).toEqual(['kept.txt']);
    // In the world a program left a socket beside the file.
    const socket = createServer();
    await new Promise<void>((resolve) => socket.listen(join(world, 'specials', 'daemon.sock'), resolve));
    try {
      const down = await cp('-r', `:${join(world, 'specials')}`, 'specials-back');
      expect(down, down.stderr).toMatchObject({ code: 0 });
      expect(down.stderr).toBe('execworld cp: daemon.sock: not copied: a socket (only files, directories and links are)\n');
      expect(readdirSync(join(here, 'specials-back'))).toEqual(['kept.txt']);
    } finally {
      socket.close();
    }
  });

  test("resolves ID:path against the session's working directory", async () => {
    const session = join(world, 'session-cwd');
    mkdirSync(session);
    const created = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['/bin/sleep', '30'], cwd: session, stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 500 },
    });
    expect(created.status).toBe(201);
    writeFileSync(join(here, 'data.bin'), Buffer.from([1, 2, 3]));
    try {
      expect((await cp('data.bin', `${created.body.id}:sub-name.bin`)).code).toBe(0);
      expect(readFileSync(join(session, 'sub-name.bin'))).toEqual(Buffer.from([1, 2, 3]));
    } finally {
      await daemon.request('DELETE', `/v1/processes/${created.body.id}`);
    }
  });

  test('says what failed in one line, and tells usage errors apart', async () => {
    const missing = await cp(`:${join(world, 'missing.txt')}`, 'x');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no such file or directory in the world');
    const outside = await cp('nothing-here', `:${world}`);
    expect(outside.code).toBe(1);
    const denied = await cp('back.sh', `:${join(world, 'no-such-dir', 'x.sh')}`);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/^execworld: FS_NOT_FOUND: /m);
    for (const args of [['a', 'b'], [':/a', ':/b'], ['only-one'], ['x', ':relative']]) {
      const usage = await cp(...args);
      expect(usage.code, `${args.join(' ')}: ${usage.stderr}`).toBe(2);
    }
  });

  test.skipIf(skipTerminal)(`draws a progress bar on a terminal${skipTerminal ? ` (skipped: ${tmuxUnavailable})` : ''}`, async () => {
    if (tmuxUnavailable !== undefined) throw new Error(`cannot run the terminal test on this CI host: ${tmuxUnavailable}`);
    const big = join(here, 'big.bin');
    writeFileSync(big, Buffer.alloc(24 * 1024 * 1024, 7));
    const tmux = new Tmux();
    try {
      await tmux.start('cp', ['cp', big, `:${join(world, 'big.bin')}`], env, { cols: 100, rows: 10 });
      expect(await tmux.exitStatus('cp', 60_000)).toBe(0);
      const screen = await tmux.screen('cp');
      expect(screen).toMatch(/big\.bin \[#+\] 100% 24\.0 MiB/);
      expect(
        createHash('sha256')
          .update(readFileSync(join(world, 'big.bin')))
          .digest('hex'),
      ).toBe(createHash('sha256').update(readFileSync(big)).digest('hex'));
    } finally {
      await tmux.close();
    }
    expect(existsSync(join(world, 'big.bin'))).toBe(true);
  });
});
