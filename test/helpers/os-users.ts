/** OS users a test makes with useradd (as root) and removes with userdel once its file is done. */
import { execFileSync } from 'node:child_process';
import { lookupUser, type RunAs } from '../../service/src/provider/run-as.ts';

/** Whether this process may make users: root, with useradd installed. */
export function canMakeUsers(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('useradd', ['--help'], { stdio: 'ignore' });
    return true;
  } catch (_error) {
    return false;
  }
}

/**
 * Users of this test file: `make()` adds one (no home, no login shell, a
 * group of its own) under a name no other test file uses; every one is
 * removed after the file.
 */
export function osUsers(afterAll: (cleanup: () => void) => void): { make(): RunAs } {
  const names: string[] = [];
  afterAll(() => {
    for (const name of names.splice(0)) {
      try {
        execFileSync('userdel', [name], { stdio: 'ignore' });
      } catch (_error) {
        // Already gone.
      }
    }
  });
  return {
    make() {
      const name = `ewt${process.pid}x${names.length}`;
      execFileSync('useradd', ['--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin', name], { stdio: 'ignore' });
      names.push(name);
      const user = lookupUser(name);
      if (user === undefined) throw new Error(`useradd made no user ${name}`);
      return user;
    },
  };
}
