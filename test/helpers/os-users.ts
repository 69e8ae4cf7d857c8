/**
 * Real OS users for the tests of the boundary between owners: made with
 * `useradd` (as root), each with a home directory of its own, and removed with
 * it when the test file is done. Names carry the test process's pid, so test
 * files running side by side never share a user.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
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
