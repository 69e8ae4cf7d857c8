/**
 * The terminals' programs are started with posix_spawn (libc.ts,
 * `spawnProgram`), which copies none of the daemon's page tables, and their
 * exits are told by pidfds in one epoll set (`ExitSet`), not by asking every
 * child on every SIGCHLD. What Node's spawn gave a child, this gives too: no
 * signal blocked or ignored (the daemon ignores SIGPIPE), blocking stdio, the
 * working directory asked for.
 */
import { closeSync, openSync, readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { collectExit, ExitSet, spawnProgram } from '../../service/src/provider/posix/libc.ts';
import { shellPty } from '../helpers/pty.ts';
import { waitFor } from '../helpers/wait.ts';

/** The signals 1–31 set in a /proc status mask line (`SigIgn`, `SigBlk`); glibc keeps 32 and 33 for itself. */
function standardSignals(status: string, field: string): number[] {
  const mask = BigInt(`0x${new RegExp(`^${field}:\\s*([0-9a-f]+)$`, 'm').exec(status)![1]!}`);
  return Array.from({ length: 31 }, (_, index) => index + 1).filter((signal) => (mask >> BigInt(signal - 1)) & 1n);
}

describe('spawnProgram', () => {
  test("starts a terminal's program with no signal ignored or blocked, in its directory, reading a blocking terminal", async () => {
    // The masks are read by the program that execs in the shell's place: a shell waiting for a child has every
    // signal blocked for that while (dash's wait), and a reader it started could see it then.
    const { pty, output, exit } = shellPty('pwd; read x; echo "got $x"; exec grep -E "^Sig(Ign|Blk)" /proc/self/status');
    try {
      await waitFor('the program to print its directory', () => output().includes('/tmp'));
      // A non-blocking stdin would end the read at once, with nothing.
      await pty.write('typed\n');
      await waitFor('the line to be read', () => output().includes('got typed'));
      await waitFor('the program to end', () => exit() !== undefined);
      expect(exit()).toEqual({ exitCode: 0, signal: 0 });
      // Node's own SIGPIPE is ignored: a child that kept it would never die of a closed pipe.
      expect(standardSignals(output(), 'SigIgn')).toEqual([]);
      expect(standardSignals(output(), 'SigBlk')).toEqual([]);
    } finally {
      if (exit() === undefined) pty.kill('SIGKILL');
    }
  });

  test('refuses a program that is not there with its errno', () => {
    const stdio = openSync('/dev/null', 'r+');
    try {
      expect(() => spawnProgram('/nonexistent/program', ['program'], {}, '/', [stdio, stdio, stdio])).toThrow(expect.objectContaining({ code: 'ENOENT' }));
      expect(() => spawnProgram('/bin/true', ['true'], {}, '/nonexistent-directory', [stdio, stdio, stdio])).toThrow(
        expect.objectContaining({ code: 'ENOENT' }),
      );
    } finally {
      closeSync(stdio);
    }
  });

  test('an exit set tells the children that exited, each once, and not the ones that run', async () => {
    const set = ExitSet.open()!;
    expect(set).toBeDefined();
    const stdio = openSync('/dev/null', 'r+');
    const pids: number[] = [];
    try {
      for (let index = 0; index < 4; index += 1) {
        const pid = spawnProgram('/bin/sleep', ['sleep', '60'], { PATH: '/usr/bin:/bin' }, '/', [stdio, stdio, stdio]);
        pids.push(pid);
        expect(set.add(pid)).toBe(true);
      }
      expect(set.exited()).toEqual([]);
      process.kill(pids[1]!, 'SIGKILL');
      process.kill(pids[3]!, 'SIGTERM');
      const told: number[] = [];
      await waitFor('both exits to be told', () => {
        told.push(...set.exited());
        return told.length >= 2;
      });
      expect(told.sort()).toEqual([pids[1], pids[3]].sort());
      expect(set.exited()).toEqual([]);
      expect(collectExit(pids[1]!)).toEqual({ exitCode: 0, signal: 9 });
      expect(collectExit(pids[3]!)).toEqual({ exitCode: 0, signal: 15 });
      expect(collectExit(pids[0]!)).toBeUndefined();
      // A child reaped already cannot be watched.
      expect(set.add(pids[1]!)).toBe(false);
      expect(readFileSync(`/proc/${pids[0]!}/comm`, 'utf8').trim()).toBe('sleep');
    } finally {
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch (_error) {
          // Ended.
        }
        void waitFor('the child to be collected', () => collectExit(pid) !== undefined);
      }
      closeSync(stdio);
    }
  });
});
