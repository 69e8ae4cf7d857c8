/**
 * Running a session's programs as another OS user: who that user is, read
 * from the host's user database, and how a child is started as them.
 *
 * A managed process gets the user's uid and gid through Node's spawn, which
 * also drops every supplementary group of the daemon. node-pty's fork only
 * calls setgid and setuid, which would leave the daemon's own groups (root's)
 * on the terminal's shell; so a terminal's program is started through
 * `setpriv --clear-groups` (util-linux), which execs it under the same pid.
 * @module
 */
import { accessSync, constants as fsConstants, readFileSync } from 'node:fs';

/** An OS user a session's programs run as. */
export interface RunAs {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  readonly home: string;
  readonly shell: string;
}

/**
 * The user named `name` in a passwd file's text (`name:x:uid:gid:gecos:home:shell`).
 * @returns undefined when there is no such user.
 */
export function lookupUser(name: string, passwd: string = readFileSync('/etc/passwd', 'utf8')): RunAs | undefined {
  for (const line of passwd.split('\n')) {
    const fields = line.split(':');
    if (fields.length < 7 || fields[0] !== name) continue;
    const uid = Number(fields[2]);
    const gid = Number(fields[3]);
    if (!Number.isSafeInteger(uid) || !Number.isSafeInteger(gid) || uid < 0 || gid < 0) return undefined;
    return { name, uid, gid, home: fields[5]!, shell: fields[6]! };
  }
  return undefined;
}

/** The entries a child of `user` finds about itself in its environment. */
export function userEnvironment(user: RunAs): Record<string, string> {
  return { HOME: user.home, USER: user.name, LOGNAME: user.name, SHELL: user.shell };
}

let setpriv: string | undefined;

/**
 * The program and arguments that start `file args` as `user` on a terminal.
 * @throws when setpriv is not installed.
 */
export function asUser(user: RunAs, file: string, args: readonly string[]): { file: string; args: string[] } {
  setpriv ??= ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => {
    try {
      accessSync(path, fsConstants.X_OK);
      return true;
    } catch (_error) {
      return false;
    }
  });
  if (setpriv === undefined) throw new Error('running a terminal as another user needs setpriv (util-linux), which is not installed');
  return { file: setpriv, args: [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--', file, ...args] };
}
