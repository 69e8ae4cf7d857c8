/**
 * Running a session's programs as another OS user: who that user is, read
 * from the host's user database, and how a child of the daemon (root) becomes
 * that user's program without anything being done as root on the user's
 * behalf.
 *
 * The daemon forks the child itself (Node's spawn, node-pty), so the child is
 * born in its session's cgroup and is the daemon's to wait for. Between the
 * fork and the exec the child, still root, touches nothing the user names: it
 * changes to `/`, sets up its stdio or terminal, and drops to the user's gid
 * and uid (with no supplementary group, see {@link dropSupplementaryGroups}).
 * Only then does it exec, and what it execs is the launcher, GNU `env`, at
 * its absolute path: `env -C <cwd> -- <program> <args>` changes to the
 * owner's working directory and execs the owner's program (looked up on the
 * owner's PATH), both already as the user. So the kernel checks the working
 * directory and the program as the user's, and the dynamic loader reads the
 * owner's environment (LD_PRELOAD, LD_LIBRARY_PATH, …) only in processes that
 * run as the user, where it can do nothing the user could not.
 *
 * Whether the working directory and the program are there is asked first, as
 * the user, by the user's worker (see `launchFailure`), so that a create is
 * refused with the error that says why; if either changes between that
 * answer and the exec, the launcher exits 125 (the directory), 126 or 127
 * (the program) with its message on the program's stderr or terminal.
 * @module
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { ProviderError } from './errors.ts';

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

/**
 * The user a create's `user` names, as docker's `--user` takes one: a user
 * name, or a numeric uid (its first entry in the passwd file, which gives the
 * group, home and shell the program runs with). A uid with no entry is
 * unknown: without one there is no group or home to give it.
 * @returns undefined when there is no such user.
 */
export function lookupAccount(nameOrUid: string, passwd: string = readFileSync('/etc/passwd', 'utf8')): RunAs | undefined {
  if (!/^[0-9]+$/.test(nameOrUid)) return lookupUser(nameOrUid, passwd);
  const uid = Number(nameOrUid);
  for (const line of passwd.split('\n')) {
    const fields = line.split(':');
    if (fields.length >= 7 && fields[2] === String(uid)) return lookupUser(fields[0]!, passwd);
  }
  return undefined;
}

/**
 * Refuses a `user` (a name or a uid) other than this process's own. A local
 * runtime starts its programs as the process it lives in, which becomes
 * nobody else: only a daemon does, for the owners that may (see
 * SessionRegistry.runAs). Naming its own user, by name or uid, is no switch.
 * @throws {ProviderError} INVALID_ARGUMENT naming the user and this process's.
 */
export function assertOwnUser(user: string | undefined): void {
  if (user === undefined) return;
  const uid = process.getuid?.();
  const name = userInfo().username;
  if (user === name || (uid !== undefined && /^[0-9]+$/.test(user) && Number(user) === uid)) return;
  throw new ProviderError(
    'INVALID_ARGUMENT',
    `user ${user}: a local runtime runs programs as its own process's user (${name}${uid === undefined ? '' : `, uid ${uid}`}); ` +
      'running them as another user takes a daemon (execworld serve) that runs as root',
  );
}

/** The entries a child of `user` finds about itself in its environment. */
export function userEnvironment(user: RunAs): Record<string, string> {
  return { HOME: user.home, USER: user.name, LOGNAME: user.name, SHELL: user.shell };
}

/** How a child starts as a user: what it execs once it is that user, from where, with which ids. */
export interface Launch {
  readonly file: string;
  readonly args: string[];
  /** Where the child is before the exec, while it is still root: `/`, which no user controls. */
  readonly cwd: string;
  readonly uid: number;
  readonly gid: number;
}

let launcher: string | undefined;

/**
 * The launcher: GNU env with `--chdir` (coreutils 8.28 or later), checked
 * once by running it.
 * @throws {ProviderError} UNSUPPORTED where there is none.
 */
export function launcherPath(): string {
  launcher ??= ['/usr/bin/env', '/bin/env'].find((path) => spawnSync(path, ['-C', '/', '--', path, '--version'], { stdio: 'ignore', env: {} }).status === 0);
  if (launcher === undefined) {
    throw new ProviderError('UNSUPPORTED', 'running programs as another user needs env with --chdir (GNU coreutils 8.28 or later) at /usr/bin/env');
  }
  return launcher;
}

/**
 * How `file args` starts as `user` in `cwd`: the child drops to the user in
 * `/`, then the launcher changes to `cwd` and execs the program.
 * @throws {ProviderError} INVALID_ARGUMENT for a program whose name holds `=`,
 *   which the launcher would take for a variable; UNSUPPORTED without a launcher.
 */
export function launchAs(user: RunAs, file: string, args: readonly string[], cwd: string): Launch {
  if (file.includes('=')) {
    throw new ProviderError('INVALID_ARGUMENT', `argv[0] ${file} holds "=": a program of an owner that runs as another user cannot be named so`);
  }
  dropSupplementaryGroups();
  return { file: launcherPath(), args: ['-C', cwd, '--', file, ...args], cwd: '/', uid: user.uid, gid: user.gid };
}

/**
 * Makes this process (root) hold no supplementary group. node-pty's child
 * calls setgid and setuid but not setgroups, so it would keep the groups of
 * the process that forked it (root's) into the user's program; with none
 * here, it has only the user's gid. Root needs no group for its own access.
 * Node's spawn drops the groups itself (setgroups before setgid).
 */
function dropSupplementaryGroups(): void {
  if (process.getgroups === undefined || process.setgroups === undefined) return;
  if (process.getgroups().length > 0) process.setgroups([]);
}
