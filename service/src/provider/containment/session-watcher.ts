/**
 * The session watcher: a small process each daemon starts beside itself, at
 * start and before its first session, that ends the daemon's sessions within
 * moments of the daemon's death, by any means (SIGKILL, a crash, the OOM
 * killer), instead of at the next start on the same state directory.
 *
 * The daemon holds the write end of a pipe that is the watcher's stdin; the
 * kernel closes it when the daemon dies, however it dies, and the watcher
 * reads end-of-file (no pidfd, no polling, the same on every kernel). It
 * then waits for the daemon to be gone from the process table and runs
 * exactly the recovery a next start would run for that daemon's journal
 * ({@link recoverSessions}, limited to that one record, with the daemon's
 * scope of uids and cgroup), and exits. A daemon that shuts down cleanly has
 * ended its sessions and removed its journal first, and says `closed` down
 * the pipe before closing it: the watcher exits at once. The next start's
 * recovery stays the backstop, for a watcher that died too.
 *
 * What it is not, and why:
 * - Not in any session's cgroup: it is started while the daemon is in its
 *   own cgroup (never inside a spawn into a session's), so it is beside the
 *   daemon, outside the `execworld-<pid>` cgroup it kills.
 * - Not holding any session's descriptors: like every child it starts with
 *   fds 0-2 only (its stdin, the pipe; the daemon's stdout and stderr, so
 *   what it did reaches the daemon's log), and it starts before any session.
 * - Not a session's: in subreaper mode the daemon would take any child it
 *   did not spawn as a session for an orphan of one; the containment is told
 *   to spare it.
 * - Not in the daemon's process group or session (it starts a session of its
 *   own), so a Ctrl-C or a hangup meant for the daemon's terminal, or a kill
 *   of the daemon's process group, leaves it to do its work.
 * - It runs as the daemon's uid: sessions of owners mapped to other users
 *   cannot signal it, sessions of owners that share the daemon's uid can (as
 *   they can signal the daemon itself).
 * - Cheap while it waits: the waiting is a plain script with no module of
 *   the daemon loaded; the recovery's code is loaded only once the daemon is
 *   gone.
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { ProcessIdentity } from '../inspect/inspector.ts';
import { closeInheritedDescriptorsOnExec } from '../posix/libc.ts';
import { LinuxInspector } from '../inspect/linux.ts';
import type { Containment } from './containment.ts';
import { recoverSessions, type RecoveryReport, type RecoveryScope } from './journal.ts';

const ENTRY = fileURLToPath(new URL('../../../bin/session-watcher.js', import.meta.url));
/** The environment variable that carries the watcher's instructions. */
export const WATCHER_ENV = 'EXECWORLD_SESSION_WATCHER';
/**
 * What the daemon says down the pipe before it closes it after a clean
 * shutdown (bin/session-watcher.js compares with the same text: it loads no
 * module of the daemon while it waits).
 */
export const CLOSED = 'closed\n';
/** How long the watcher waits, after end-of-file, for the daemon to be gone from the process table. */
const DEATH_TIMEOUT_MS = 30_000;

/** What the watcher is told: whose journal, where, and the scope of the recovery. */
interface WatcherInstructions {
  readonly directory: string;
  readonly daemon: ProcessIdentity;
  readonly scope: RecoveryScope;
}

export interface SessionWatcher {
  readonly pid: number;
  /** After a clean shutdown (the journal removed): the watcher exits without doing anything. */
  close(): void;
}

/**
 * Starts the watcher of this daemon, whose journal of identity `daemon` is in
 * `directory`. `onLost` hears why, when the watcher could not start or ended
 * while the daemon runs; undefined when it could not start.
 */
export function startSessionWatcher(
  directory: string,
  daemon: ProcessIdentity,
  scope: RecoveryScope,
  containment: Containment,
  onLost: (why: string) => void,
): SessionWatcher | undefined {
  const instructions: WatcherInstructions = { directory, daemon, scope };
  try {
    // Exactly fds 0-2, as for every child: what this process inherited is made close-on-exec first.
    closeInheritedDescriptorsOnExec();
  } catch (error) {
    onLost(`its descriptors could not be sealed: ${(error as Error).message}`);
    return undefined;
  }
  const child: ChildProcess = spawn(process.execPath, [ENTRY], {
    stdio: ['pipe', 'inherit', 'inherit'],
    detached: true,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', [WATCHER_ENV]: JSON.stringify(instructions) },
  });
  let closed = false;
  child.once('error', (error) => {
    if (!closed) onLost(`it could not run: ${error.message}`);
    closed = true;
  });
  const pid = child.pid;
  if (pid === undefined) return undefined;
  containment.helperStarted?.(pid);
  child.once('exit', (code, signal) => {
    if (!closed) onLost(`it exited (${signal ?? code})`);
    closed = true;
  });
  const pipe = child.stdin as Socket;
  // A watcher that died makes the last write fail with EPIPE: nothing to tell it any more.
  pipe.on('error', () => undefined);
  // Neither the watcher nor its pipe keeps the daemon's event loop alive.
  child.unref();
  pipe.unref();
  return {
    pid,
    close() {
      if (closed) return;
      closed = true;
      pipe.end(CLOSED);
    },
  };
}

/** One JSON line on stdout in the shape of the daemon's log (a reader that went away is no error). */
function logLine(level: number, fields: object, msg: string): void {
  try {
    writeSync(1, `${JSON.stringify({ level, time: Date.now(), pid: process.pid, hostname: hostname(), ...fields, msg })}\n`);
  } catch (_error) {
    // Nobody reads the log any more.
  }
}

/**
 * The watcher's work once its pipe reached end-of-file without `closed`:
 * waits until the daemon is gone, then ends what its journal records.
 */
export async function afterDaemon(environment: NodeJS.ProcessEnv = process.env): Promise<void> {
  const { directory, daemon, scope } = JSON.parse(environment[WATCHER_ENV] ?? 'null') as WatcherInstructions;
  const inspector = new LinuxInspector();
  // The pipe closes as the daemon exits, a moment before the kernel has it a zombie.
  const deadline = Date.now() + DEATH_TIMEOUT_MS;
  while (inspector.isAlive(daemon)) {
    if (Date.now() > deadline) {
      logLine(40, { daemon: daemon.pid }, 'the session watcher lost its pipe while the daemon still runs; a later start will end what the daemon leaves');
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  // The waits of a cgroup kill never hold a process open; this process has nothing else to do, so it is held here.
  const hold = setInterval(() => undefined, 60_000);
  let report: RecoveryReport;
  try {
    report = await recoverSessions(directory, { ...scope, inspector, only: daemon });
  } finally {
    clearInterval(hold);
  }
  for (const refusal of report.refused) logLine(40, refusal, 'a session record was not acted on');
  if (report.journals.length > 0)
    logLine(
      40,
      { daemon: daemon.pid, journals: report.journals, cgroups: report.cgroups, killed: report.killed },
      'the daemon died: ended the sessions it left',
    );
}
