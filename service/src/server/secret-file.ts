/**
 * Whether the daemon may trust a file of secrets it is given (its token
 * file): that nobody but root and the daemon's own uid could have written
 * what it holds or could put another file in its place, and that it is not
 * readable by users the daemon does not share a group with.
 *
 * What is accepted, on systems whose file modes guard privacy (not Windows):
 *
 * - the file itself: a regular file owned by root or by the daemon's uid;
 *   nobody but its owner may write it; other users may do nothing with it;
 *   its group may read it only when that group is one of the daemon's (its
 *   primary group or a supplementary one). So 0600 and 0400 pass, and 0640
 *   or 0440 with the daemon's group: the file Kubernetes mounts from a
 *   Secret with `defaultMode: 0440` and `fsGroup`, owned by root and the
 *   pod's fsGroup, which the daemon holds as a supplementary group. A file
 *   with a POSIX access control list beyond its mode (named users or groups,
 *   whom the mode does not show: Linux) is refused.
 * - every directory the path leads through, symbolic links followed (the
 *   chain is resolved one entry at a time, each directory a link leads
 *   through counted): owned by root or the daemon's uid, and written by
 *   nobody else, or else sticky (mode +t, as /tmp and the tmpfs of a
 *   Kubernetes Secret volume are), where the kernel lets only an entry's
 *   owner rename or remove it, and then every entry the path takes in it is
 *   owned by root or the daemon's uid. Another user can therefore neither
 *   edit the file nor swap it, a link on the way or a directory above it.
 *
 * Anything else is refused with one line that names the path and the fault.
 * @module
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, readlinkSync, type Stats } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { ConfigError } from './config.ts';
import { hasAccessAcl } from '../provider/api.ts';

/** Who reads the file: the daemon's effective uid and every group it holds. */
export interface Reader {
  readonly uid: number;
  readonly groups: readonly number[];
}

/** The daemon process as the reader of its files. */
export function daemonReader(): Reader {
  const uid = process.geteuid?.() ?? 0;
  const groups = [process.getegid?.() ?? 0, ...(process.getgroups?.() ?? [])];
  return { uid, groups: [...new Set(groups)] };
}

/** The sticky bit of a directory's mode: only an entry's owner (or the directory's, or root) may rename or remove it. Node's constants lack it. */
const S_ISVTX = 0o1000;

/** Links followed before the path is refused as a loop (Linux's own limit, MAXSYMLINKS). */
const MAX_LINKS = 40;

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');

/** A directory the walk stands in, and whether its entries must be owned by root or the reader (it is sticky and others may write it). */
interface Step {
  readonly path: string;
  readonly ownedEntries: boolean;
}

/**
 * The content of the secret file `path` (`what` names it in errors: "token
 * file"), once the file and every directory on its way are found as the
 * module says.
 * @throws {ConfigError} one line naming `path` and what is wrong.
 */
export function readSecretFile(path: string, what: string, reader: Reader = daemonReader()): string {
  const named = resolve(path);
  const fail = (problem: string): never => {
    throw new ConfigError(`${what} ${path}: ${problem}`);
  };
  const owned = (uid: number): boolean => uid === 0 || uid === reader.uid;
  const look = (entry: string): Stats => {
    try {
      return lstatSync(entry);
    } catch (error) {
      return fail(`cannot read ${entry} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  };
  /** The step into the directory `directory`, or the refusal of it. */
  const enter = (directory: string, info: Stats): Step => {
    if (!owned(info.uid))
      return fail(`the directory ${directory} belongs to uid ${info.uid}, neither root nor the daemon's uid ${reader.uid}, who could swap what is in it`);
    if ((info.mode & 0o022) === 0) return { path: directory, ownedEntries: false };
    if ((info.mode & S_ISVTX) === 0) {
      // A directory's access control list shows in its mode: the group bits are its mask, which holds every
      // named user's and group's rights, so one that lets another user write is refused here too.
      const listed = hasAccessAcl(directory) === true ? ' (its access control list, which getfacl shows, names who)' : '';
      return fail(`the directory ${directory} may be written by its group or other users (mode ${octal(info.mode)})${listed}, who could swap what is in it`);
    }
    return { path: directory, ownedEntries: true };
  };

  const stack: Step[] = [enter('/', look('/'))];
  const pending = named.split('/').filter((name) => name !== '' && name !== '.');
  let links = 0;
  let file: { path: string; info: Stats } | undefined;
  while (pending.length > 0) {
    const name = pending.shift()!;
    const here = stack.at(-1)!;
    if (name === '..') {
      // The parent is the directory entered before this one: already judged, as the walk holds real paths only.
      if (stack.length > 1) stack.pop();
      continue;
    }
    const entry = here.path === '/' ? `/${name}` : `${here.path}/${name}`;
    const info = look(entry);
    if (here.ownedEntries && !owned(info.uid)) {
      fail(
        `${entry} belongs to uid ${info.uid}, who may rename or remove it in ${here.path}, a directory others may write (mode ${octal(look(here.path).mode)})`,
      );
    }
    if (info.isSymbolicLink()) {
      links += 1;
      if (links > MAX_LINKS) fail(`more than ${MAX_LINKS} symbolic links on its way (a loop)`);
      const target = readlinkSync(entry);
      if (isAbsolute(target)) stack.splice(1);
      pending.unshift(...target.split('/').filter((part) => part !== '' && part !== '.'));
    } else if (info.isDirectory()) {
      stack.push(enter(entry, info));
    } else if (pending.length > 0) {
      fail(`${entry} is not a directory`);
    } else {
      file = { path: entry, info };
    }
  }
  if (file === undefined || !file.info.isFile()) return fail(`${file?.path ?? stack.at(-1)!.path} is not a regular file`);
  const { info } = file;
  const where = file.path === named ? 'it' : file.path;
  if (!owned(info.uid)) fail(`${where} belongs to uid ${info.uid}, neither root nor the daemon's uid ${reader.uid}, who could rewrite it`);
  if ((info.mode & 0o002) !== 0) fail(`${where} may be written by other users (mode ${octal(info.mode)}); chmod 600 it`);
  if ((info.mode & 0o007) !== 0) fail(`${where} is readable by other users (mode ${octal(info.mode)}); chmod 600 it (or 640, its group one of the daemon's)`);
  if ((info.mode & 0o020) !== 0) fail(`${where} may be written by its group ${info.gid} (mode ${octal(info.mode)}); chmod g-w it`);
  if ((info.mode & 0o050) !== 0 && !reader.groups.includes(info.gid)) {
    fail(
      `${where} is readable by its group ${info.gid} (mode ${octal(info.mode)}), which is none of the daemon's groups (${reader.groups.join(', ')}); ` +
        "chmod 600 it, or give it one of the daemon's groups",
    );
  }
  // The mode bits say who may read it only where no access control list says more: named users and groups
  // of one are not in the mode (its group bits show the list's mask instead).
  if (hasAccessAcl(file.path) === true) {
    fail(`${where} has an access control list (getfacl shows it), which may let other users read it; remove it with setfacl -b`);
  }
  // Read what was judged: not a link, nor a FIFO, put in its place meanwhile.
  let fd: number;
  try {
    fd = openSync(file.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    return fail(`cannot read ${file.path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  try {
    const opened = fstatSync(fd);
    if (opened.dev !== info.dev || opened.ino !== info.ino) fail(`${file.path} was replaced while it was read`);
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}
