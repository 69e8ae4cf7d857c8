/**
 * The process part of the conformance suite: `resolveExecutable` and
 * `spawn` (contract §1.2–1.4, §1.8, §2.3, §2.8, §7), run against each runtime
 * in each world. Every program is Node.js, the one program every world has,
 * so the same scenarios run on Linux and, under Wine, against a daemon on
 * Windows. Where worlds differ on purpose the difference is declared in
 * {@link ProcessWorld}, never skipped in a body.
 */
import { readFileSync, statSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SubprocessHandle, SubprocessOutcome, SubprocessRuntime, SubprocessSpawnSpec, SubprocessStdio } from '@execworld/sdk/seam';
import { collect, pidAlive, sleep, waitFor } from '../helpers/wait.ts';

/** Where the processes run, and how that world differs from the others. */
export interface ProcessWorld {
  /** The absolute path of Node.js in the world. */
  readonly node: string;
  /** A directory of the world, the processes' cwd. */
  readonly cwd: string;
  /** An absolute path under which nothing exists in the world. */
  readonly missing: string;
  /** A program every PATH of the world has, and how its resolved path ends. */
  readonly onPath: { readonly name: string; readonly resolved: RegExp };
  /**
   * 'posix': a process ended by a signal reports it (`{exitCode: null, signal}`), and a
   * process may ignore SIGTERM. 'win32': there are no signals; a process ended by force
   * reports `{exitCode: 1, signal: null}`, and nothing can refuse the end.
   */
  readonly signals: 'posix' | 'win32';
  /**
   * 'immediate': `pid` is the real pid when `spawn` returns. 'after-start': it is
   * -1 until the provider acknowledged the spawn (a remote runtime), then real.
   */
  readonly pidAtSpawn: 'immediate' | 'after-start';
  /**
   * How `done` names a spawn that failed. 'errno': its `code` is the operating
   * system's (ENOENT), as Node's own error. 'catalog': its `code` is the daemon
   * catalog's (EXECUTABLE_NOT_FOUND, CWD_NOT_FOUND) and the errno is in `errno`.
   */
  readonly spawnFailure: 'errno' | 'catalog';
  /** Whether a spill file's path names a file this test can read, with POSIX modes. */
  readonly spillReadable: boolean;
  /** Whether process `pid` of the world runs now (not a zombie). @default asks the world with a Node.js probe */
  readonly alive?: (pid: number) => boolean | Promise<boolean>;
}

/** This Linux host, as the local runtime and a daemon on it see it. */
export const LINUX_WORLD: ProcessWorld = {
  node: process.execPath,
  cwd: '/tmp',
  missing: '/definitely/missing',
  onPath: { name: 'sh', resolved: /\/sh$/ },
  signals: 'posix',
  pidAtSpawn: 'immediate',
  spawnFailure: 'errno',
  spillReadable: true,
  alive: pidAlive,
};

export interface ProcessRuntimeUnderTest {
  readonly runtime: SubprocessRuntime & { dispose(): Promise<void> };
  /** Waits until a handle's pid is known. */
  started(handle: SubprocessHandle): Promise<number>;
  close(): Promise<void>;
}

const collectBoth: SubprocessStdio = { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } };
const stdoutOf = (handle: SubprocessHandle): string => handle.collected.stdout!.readFrom(0).text;

/**
 * A Node.js program that starts `script` as a child (sharing its stdout unless `stdio` says
 * otherwise), prints the child's pid, and does not wait for it. On Windows the child is
 * detached: Node puts the children it does not detach in a job of its own that ends them when
 * it exits, and these children are to outlive their parent.
 */
const startChild = (script: string, stdio = "'inherit'"): string =>
  `const c = require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(script)}], { stdio: ${stdio}, detached: process.platform === 'win32' }); c.unref(); console.log(c.pid);`;

export function defineProcessContract(name: string, make: () => Promise<ProcessRuntimeUnderTest>, world: ProcessWorld): void {
  describe(`${name}: process contract`, () => {
    let subject: ProcessRuntimeUnderTest;
    let runtime: ProcessRuntimeUnderTest['runtime'];
    beforeAll(async () => {
      subject = await make();
      runtime = subject.runtime;
    }, 120_000);
    afterAll(() => subject.close());

    const node = (script: string, extra: Partial<SubprocessSpawnSpec> = {}): SubprocessSpawnSpec => ({
      argv: [world.node, '-e', script],
      cwd: world.cwd,
      stdio: collectBoth,
      graceMs: 2000,
      ...extra,
    });
    /** How a process ended by force (terminate's last tier, or any end on Windows) reports it. */
    const forced = (signal: NodeJS.Signals): SubprocessOutcome => (world.signals === 'posix' ? { exitCode: null, signal } : { exitCode: 1, signal: null });
    const alive = async (pid: number): Promise<boolean> => {
      if (world.alive !== undefined) return world.alive(pid);
      const probe = runtime.spawn(
        node(`try { process.kill(${pid}, 0); console.log('alive') } catch (e) { console.log(e.code === 'EPERM' ? 'alive' : 'gone') }`),
      );
      await probe.done;
      return stdoutOf(probe).trim() === 'alive';
    };

    describe('resolveExecutable', () => {
      it('verifies absolute paths and looks bare names up on PATH', async () => {
        await expect(runtime.resolveExecutable(world.node)).resolves.toBe(world.node);
        await expect(runtime.resolveExecutable(world.onPath.name)).resolves.toMatch(world.onPath.resolved);
        await expect(runtime.resolveExecutable(`${world.missing}${world.signals === 'posix' ? '/' : '\\'}program`)).rejects.toThrow(
          /is not an executable file/,
        );
        await expect(runtime.resolveExecutable(world.cwd)).rejects.toThrow(/is not an executable file/);
        await expect(runtime.resolveExecutable('definitely-missing-tool', { PATH: '' })).rejects.toThrow(/was not found on PATH/);
      });

      it('rejects relative paths, empty commands, and an abort with exactly its reason', async () => {
        await expect(runtime.resolveExecutable('./bin/x')).rejects.toThrow(/is a relative path/);
        await expect(runtime.resolveExecutable('')).rejects.toThrow(/must be non-empty/);
        await expect(runtime.resolveExecutable(world.onPath.name, undefined, AbortSignal.abort('stop'))).rejects.toBe('stop');
      });
    });

    describe('spawn', () => {
      it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31])('throws synchronously for graceMs %s', (graceMs) => {
        expect(() => runtime.spawn(node('', { graceMs }))).toThrow(/graceMs must be a positive finite number no greater than/);
      });

      it('throws synchronously for an empty program and an aborted signal', () => {
        expect(() => runtime.spawn(node('', { argv: [] }))).toThrow(/expected a non-empty program name at argv\[0\]/);
        expect(() => runtime.spawn(node('', { argv: [''] }))).toThrow(/expected a non-empty program name at argv\[0\]/);
        expect(() => runtime.spawn(node('', { signal: AbortSignal.abort('too late') }))).toThrow('aborted before spawn: too late');
        const reasonless = { aborted: true, reason: undefined, addEventListener() {}, removeEventListener() {} } as unknown as AbortSignal;
        expect(() => runtime.spawn(node('', { signal: reasonless }))).toThrow('aborted before spawn: aborted');
      });

      it('throws synchronously for environment entries no process can carry', () => {
        expect(() => runtime.spawn(node('', { env: { 'A=B': 'x' } }))).toThrow('env name "A=B" is not valid');
        expect(() => runtime.spawn(node('', { env: { NAME: 'a\0b' } }))).toThrow('env.NAME must not contain a NUL character');
      });

      it(`returns at once with ${world.pidAtSpawn === 'immediate' ? 'the real pid' : 'pid -1, then the real pid'}`, async () => {
        const handle = runtime.spawn(node('console.log(process.pid)'));
        if (world.pidAtSpawn === 'immediate') expect(handle.pid).toBeGreaterThan(0);
        else expect(handle.pid).toBe(-1);
        const pid = await subject.started(handle);
        expect(pid).toBeGreaterThan(0);
        expect(handle.pid).toBe(pid);
        await handle.done;
        expect(stdoutOf(handle).trim()).toBe(String(pid));
      });

      it('never interprets argv through a shell', async () => {
        const handle = runtime.spawn(
          node('process.stdout.write(process.argv.slice(1).join("|"))', {
            argv: [world.node, '-e', 'process.stdout.write(process.argv.slice(1).join("|"))', '$HOME', '%PATH%', '"a b"', "'c'"],
          }),
        );
        await handle.done;
        expect(stdoutOf(handle)).toBe(`$HOME|%PATH%|"a b"|'c'`);
      });

      it('reports exact exit codes, and how an end by force is reported', async () => {
        await expect(runtime.spawn(node('process.exit(42)')).done).resolves.toEqual({ exitCode: 42, signal: null });
        await expect(runtime.spawn(node("process.kill(process.pid, 'SIGTERM'); setTimeout(() => {}, 30000)")).done).resolves.toEqual(forced('SIGTERM'));
      });

      it('rejects done for a missing program and a missing cwd; waitForExit is true at once', async () => {
        const separator = world.signals === 'posix' ? '/' : '\\';
        const missing = runtime.spawn(node('', { argv: [`${world.missing}${separator}program`] }));
        await expect(missing.done).rejects.toMatchObject(
          world.spawnFailure === 'errno' ? { code: 'ENOENT' } : { code: 'EXECUTABLE_NOT_FOUND', errno: 'ENOENT' },
        );
        const badCwd = runtime.spawn(node('', { cwd: `${world.missing}${separator}dir` }));
        await expect(badCwd.done).rejects.toThrow(/ENOENT/);
        await expect(badCwd.done).rejects.toMatchObject({ code: 'CWD_NOT_FOUND' });
        await expect(badCwd.waitForExit()).resolves.toBe(true);
        expect(badCwd.pid).toBe(-1);
      });

      it('runs with the scrubbed environment plus explicit entries and tombstones', async () => {
        vi.stubEnv('EXECWORLD_CONTRACT_PROBE', 'v');
        vi.stubEnv('DSH_STALE', 'old');
        vi.stubEnv('EXECWORLD_CONTRACT_TOKEN', 'secret');
        const names = ['EXECWORLD_CONTRACT_PROBE', 'DSH_STALE', 'EXECWORLD_CONTRACT_TOKEN', 'DSH_SHELL', 'DSH_SESSION_ID', 'EXPLICIT_OVERRIDE_PASSWORD'];
        const handle = runtime.spawn(
          node(`console.log(${JSON.stringify(names)}.map((name) => process.env[name] ?? 'absent').join(' '))`, {
            env: { EXECWORLD_CONTRACT_PROBE: undefined, DSH_SHELL: '1', DSH_SESSION_ID: 's', EXPLICIT_OVERRIDE_PASSWORD: 'x' },
          }),
        );
        await handle.done;
        expect(stdoutOf(handle).trim()).toBe('absent absent absent 1 s x');
      });

      it("gives 'ignore' stdin at end of file", async () => {
        const reader = runtime.spawn(node("let n = 0; process.stdin.on('data', (c) => (n += c.length)); process.stdin.on('end', () => console.log('eof', n))"));
        await expect(reader.done).resolves.toEqual({ exitCode: 0, signal: null });
        expect(stdoutOf(reader).trim()).toBe('eof 0');
      });

      it('writes batch stdin and closes it; EPIPE from a child that does not read is swallowed', async () => {
        const echo = 'process.stdin.pipe(process.stdout)';
        const batch = runtime.spawn(node(echo, { stdio: { ...collectBoth, stdin: { data: 'batch\n' } } }));
        expect(batch.stdin).toBeUndefined();
        await batch.done;
        expect(stdoutOf(batch)).toBe('batch\n');
        const big = runtime.spawn(node('process.exit(7)', { stdio: { ...collectBoth, stdin: { data: 'x'.repeat(1 << 20) } } }));
        await expect(big.done).resolves.toEqual({ exitCode: 7, signal: null });
      });

      it('ends a piped stdin without error after the child read it and exited', async () => {
        // The child reads one line and exits; closing the pipe afterwards has nothing to fail, whether
        // the close overtakes the exit or the exit the close.
        const handle = runtime.spawn(
          node("process.stdin.once('data', (d) => { console.log('got', String(d).trim()); process.exit(3); })", {
            stdio: { ...collectBoth, stdin: 'pipe' },
          }),
        );
        const stdin = handle.stdin!;
        const errors: Error[] = [];
        stdin.on('error', (error) => errors.push(error));
        stdin.write('line\n');
        await expect(handle.done).resolves.toEqual({ exitCode: 3, signal: null });
        // Locally the pipe is destroyed with the exit and the end is a no-op; remotely the close
        // is a call whose answer finishes (or fails) the stream, and then it closes.
        stdin.end();
        await waitFor('stdin to close', () => stdin.closed, 20_000);
        expect(errors).toEqual([]);
        expect(stdoutOf(handle)).toBe('got line\n');
      });

      it('hands pipe streams over and exposes readers exactly for collected streams', async () => {
        const handle = runtime.spawn(node('process.stdin.pipe(process.stdout)', { stdio: { stdin: 'pipe', stdout: 'pipe', stderr: { maxBytes: 100 } } }));
        expect(handle.stdout).toBeDefined();
        expect(handle.stdin).toBeDefined();
        expect(handle.collected.stdout).toBeUndefined();
        expect(handle.collected.stderr).toBeDefined();
        const out = collect(handle.stdout!);
        handle.stdin!.end('x\n');
        await handle.done;
        await waitFor('pipe output', () => out.text() === 'x\n');
      });

      it('keeps a 500-byte tail of 200 lines, with the whole stream in a private spill file', async () => {
        const handle = runtime.spawn(
          node("let s = ''; for (let i = 1; i <= 200; i++) s += 'line-' + String(i).padStart(4, '0') + '\\n'; process.stdout.write(s)", {
            stdio: { stdin: 'ignore', stdout: { maxBytes: 500, spill: { maxBytes: 1 << 20 } }, stderr: 'pipe' },
          }),
        );
        await handle.done;
        const read = handle.collected.stdout!.readFrom(0);
        expect(read).toMatchObject({ nextOffset: 2000, lossy: true });
        expect(read.text).toContain('line-0200');
        expect(read.text).not.toContain('line-0001');
        expect(Buffer.byteLength(read.text)).toBe(500);
        expect(handle.collected.stdout!.readFrom(1990)).toMatchObject({ text: 'line-0200\n', lossy: false });
        expect(read.spillPath).toEqual(expect.any(String));
        if (world.spillReadable) {
          const spill = readFileSync(read.spillPath!, 'utf8');
          expect(spill.length).toBe(2000);
          expect(spill).toContain('line-0001');
          expect(statSync(read.spillPath!).mode & 0o777).toBe(0o600);
        }
      });

      it('settles at most graceMs after exit while a descendant holds the collected pipe', async () => {
        const started = Date.now();
        const handle = runtime.spawn(node(startChild('setTimeout(() => {}, 30000)'), { graceMs: 300 }));
        await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
        // Far below the descendant's 30 s, which done would wait out without the grace; far above any start.
        expect(Date.now() - started).toBeLessThan(20_000);
        const descendant = Number(stdoutOf(handle).trim());
        expect(descendant).toBeGreaterThan(0);
        // A fixed wait is right here: the tree must not be seen gone while the descendant lives.
        await expect(handle.waitForExit(AbortSignal.timeout(100))).resolves.toBe(false);
        handle.terminate();
        await expect(handle.waitForExit()).resolves.toBe(true);
        expect(await alive(descendant)).toBe(false);
      });

      it(
        world.signals === 'posix' ? 'escalates to SIGKILL when SIGTERM is ignored' : 'ends a program that would ignore SIGTERM at the first tier',
        async () => {
          const handle = runtime.spawn(node("process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 50)", { graceMs: 200 }));
          await waitFor('ready', () => stdoutOf(handle).includes('ready'), 30_000);
          handle.terminate();
          await expect(handle.done).resolves.toEqual(forced('SIGKILL'));
        },
      );

      it('ends the whole tree, grandchildren included; a second terminate is the same ladder', async () => {
        const handle = runtime.spawn(node(startChild('setTimeout(() => {}, 60000)', "'ignore'") + ' setTimeout(() => {}, 60000)', { graceMs: 2000 }));
        await waitFor('grandchild pid', () => /\d+\n/.test(stdoutOf(handle)), 30_000);
        const grandchild = Number(stdoutOf(handle).trim());
        expect(await alive(grandchild)).toBe(true);
        handle.terminate();
        handle.terminate();
        await expect(handle.done).resolves.toEqual(forced('SIGTERM'));
        await expect(handle.waitForExit()).resolves.toBe(true);
        expect(await alive(grandchild)).toBe(false);
      });

      it('keeps a TERM-ignoring helper that outlives its parent owned, until terminate', async () => {
        const helper = "process.on('SIGTERM', () => {}); setInterval(() => {}, 50)";
        const handle = runtime.spawn(node(startChild(helper, "'ignore'") + ' process.exit(0)', { graceMs: 200 }));
        await handle.done;
        const pid = Number(stdoutOf(handle).trim());
        expect(await alive(pid)).toBe(true);
        await expect(handle.waitForExit(AbortSignal.timeout(150))).resolves.toBe(false);
        handle.terminate();
        await expect(handle.waitForExit()).resolves.toBe(true);
        expect(await alive(pid)).toBe(false);
      });

      it('terminates on abort, and ignores an abort after settlement', async () => {
        const controller = new AbortController();
        const handle = runtime.spawn(node('setTimeout(() => {}, 30000)', { signal: controller.signal }));
        await subject.started(handle);
        await sleep(50);
        controller.abort('stop');
        await expect(handle.done).resolves.toEqual(forced('SIGTERM'));
        const late = new AbortController();
        const done = runtime.spawn(node('process.exit(3)', { signal: late.signal }));
        await expect(done.done).resolves.toEqual({ exitCode: 3, signal: null });
        late.abort();
        await expect(done.waitForExit()).resolves.toBe(true);
      });
    });
  });
}
