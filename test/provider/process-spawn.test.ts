/**
 * A managed process's program is started with posix_spawn where the host has
 * it (posix/children.ts, `startChild`), as the terminals' are: no copy of the
 * daemon at each spawn, its exit told by a pidfd. What Node's spawn gave the
 * program, this gives too, and libuv holds no child process for it.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import type { SubprocessSpawnSpec, SubprocessStdio } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';
import { canSpawnPrograms } from '../../service/src/provider/posix/libc.ts';

const runtime = new LocalRuntime();
afterAll(() => runtime.dispose());

const collectBoth: SubprocessStdio = { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } };
const spec = (argv: string[], extra: Partial<SubprocessSpawnSpec> = {}): SubprocessSpawnSpec => ({
  argv,
  cwd: '/tmp',
  stdio: collectBoth,
  graceMs: 2000,
  env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
  ...extra,
});
const text = (handle: { collected: { stdout?: { readFrom(n: number): { text: string } } } }): string => handle.collected.stdout!.readFrom(0).text;
/** The child processes libuv holds now (Node's spawn makes one for each child it starts). */
const libuvChildren = (): number => process.getActiveResourcesInfo().filter((resource) => resource === 'ProcessWrap').length;

describe.runIf(canSpawnPrograms())('a managed process started with posix_spawn', () => {
  it('is no child of libuv, runs with its argv[0] as asked, in a session of its own, with no signal ignored or blocked', async () => {
    const before = libuvChildren();
    // cat waits on its stdin until the test has looked.
    const handle = runtime.spawn(
      spec(['sh', '-c', 'tr "\\0" " " < /proc/$$/cmdline; echo; ps -o sid= -p $$; grep -E "^Sig(Ign|Blk)" /proc/self/status; exec cat'], {
        stdio: { stdin: 'pipe', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } },
      }),
    );
    await handle.spawned;
    expect(libuvChildren()).toBe(before);
    handle.stdin!.end();
    expect(await handle.done).toEqual({ exitCode: 0, signal: null });
    const [cmdline, sid] = text(handle).split('\n');
    // The name it was asked by, not the path it was found at.
    expect(cmdline).toMatch(/^sh -c /);
    expect(Number(sid)).toBe(handle.pid);
    // glibc keeps signals 32 and 33 for itself: the standard ones are all at their defaults.
    const mask = (field: string): bigint => BigInt(`0x${new RegExp(`^${field}:\\s*(\\w+)$`, 'm').exec(text(handle))![1]}`) & 0x7fffffffn;
    expect(mask('SigIgn')).toBe(0n);
    expect(mask('SigBlk')).toBe(0n);
  });

  it('pipes stdin with its end, both outputs, and the exact code or signal of its exit', async () => {
    const piped = runtime.spawn(spec(['sh', '-c', 'cat; echo err >&2; exit 7'], { stdio: { stdin: { data: 'given\n' }, ...pick(collectBoth) } }));
    expect(await piped.done).toEqual({ exitCode: 7, signal: null });
    expect(text(piped)).toBe('given\n');
    expect(piped.collected.stderr!.readFrom(0).text).toBe('err\n');
    const killed = runtime.spawn(spec(['sh', '-c', 'kill -TERM $$; sleep 30']));
    expect(await killed.done).toEqual({ exitCode: null, signal: 'SIGTERM' });
  });

  it('keeps its caller alive until its exit is collected, as a ChildProcess does', async () => {
    // The program closes its output at once, so no pipe holds the caller: only the wait for the exit does.
    const fixture = new URL('../fixtures/await-process.ts', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', fixture], { timeout: 30_000 });
    expect(stdout).toBe('{"exitCode":3,"signal":null}\n');
  });

  it('starts a script without #! through /bin/sh, as execvp does, and a missing program fails as before', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'process-spawn-'));
    try {
      const script = join(directory, 'plain');
      writeFileSync(script, 'echo "ran as $0"\n');
      chmodSync(script, 0o755);
      const handle = runtime.spawn(spec([script]));
      expect(await handle.done).toEqual({ exitCode: 0, signal: null });
      expect(text(handle)).toBe(`ran as ${script}\n`);
      const missing = runtime.spawn(spec(['no-such-program-here']));
      await expect(missing.done).rejects.toThrow(/ENOENT|not found/);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

function pick(stdio: SubprocessStdio): Pick<SubprocessStdio, 'stdout' | 'stderr'> {
  return { stdout: stdio.stdout, stderr: stdio.stderr };
}
