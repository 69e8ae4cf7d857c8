/**
 * Real OS users for the tests of the boundary between owners: made with
 * `useradd` (as root), each with a home directory of its own, and removed with
 * it when the test file is done. Names carry the test process's pid, so test
 * files running side by side never share a user.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lookupUser, type RunAs } from '../../service/src/provider/run-as.ts';

let made = 0;

/** Whether users can be made here: root on Linux, with useradd. */
export const canMakeUsers = process.platform === 'linux' && process.getuid?.() === 0;

/** A fresh user named `ew<pid>x<n>`, with a home directory; `remove()` deletes both. */
export function makeUser(): RunAs & { remove(): void } {
  made += 1;
  const name = `ew${process.pid}x${made}`;
  execFileSync('useradd', ['--create-home', '--shell', '/bin/sh', '--user-group', name], { stdio: 'pipe' });
  const user = lookupUser(name);
  if (user === undefined) throw new Error(`useradd made no ${name}`);
  return {
    ...user,
    remove() {
      // Whatever the user still runs goes first: userdel refuses a user with processes.
      try {
        execFileSync('pkill', ['-KILL', '-u', name], { stdio: 'pipe' });
      } catch (_error) {
        // Nothing ran.
      }
      execFileSync('userdel', ['--remove', '--force', name], { stdio: 'pipe' });
    },
  };
}

/** Runs `script` under /bin/sh as `user` (its uid, gid and no other group), as that user's own program would run. */
export function runAs(user: RunAs, script: string, cwd = '/tmp'): ChildProcess {
  return spawn('/bin/sh', ['-c', script], {
    uid: user.uid,
    gid: user.gid,
    cwd,
    env: { PATH: '/usr/bin:/bin', HOME: user.home, USER: user.name },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** The users of one test file: `make()` adds one, and every one is removed (with its home) after the file. */
export function osUsers(afterAll: (cleanup: () => void) => void): { make(): RunAs } {
  const made: ReturnType<typeof makeUser>[] = [];
  afterAll(() => {
    for (const user of made.splice(0)) user.remove();
  });
  return {
    make() {
      const user = makeUser();
      made.push(user);
      return user;
    },
  };
}

/** The output of a child once it exited; rejects with its stderr when it failed. */
export function finished(child: ChildProcess): Promise<string> {
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  return new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}: ${err}`)))));
}

let flipper: string | undefined;

/**
 * `flip A B [usec]`, compiled once (with cc) where any user may run it: it
 * exchanges the entries A and B in one step (renameat2's RENAME_EXCHANGE) in
 * a loop until killed, pausing `usec` between swaps, and waits a moment and
 * goes on while either is missing, as an attacker's own program would.
 */
function flipperBinary(): string {
  if (flipper !== undefined) return flipper;
  const directory = mkdtempSync(join(tmpdir(), 'ew-flip-'));
  chmodSync(directory, 0o755);
  const source = join(directory, 'flip.c');
  writeFileSync(
    source,
    [
      '#define _GNU_SOURCE',
      '#include <fcntl.h>',
      '#include <stdlib.h>',
      '#include <unistd.h>',
      '#include <linux/fs.h>',
      '#include <sys/syscall.h>',
      'int main(int argc, char **argv) {',
      '  if (argc < 3) return 2;',
      '  int pause = argc > 3 ? atoi(argv[3]) : 0;',
      '  for (;;) {',
      '    if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) != 0) usleep(100);',
      '    else if (pause > 0) usleep(pause);',
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  const binary = join(directory, 'flip');
  execFileSync('cc', ['-O2', '-o', binary, source]);
  flipper = binary;
  return binary;
}

/** `user`'s program that keeps exchanging the entries `a` and `b` (a directory and a link, say) until it is killed. */
export function startFlipper(user: RunAs, a: string, b: string, pauseUs = 0): ChildProcess {
  return spawn(flipperBinary(), [a, b, String(pauseUs)], { uid: user.uid, gid: user.gid, stdio: 'ignore' });
}
