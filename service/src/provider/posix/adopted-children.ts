/**
 * Exits of children this process did not start in its present image: after a
 * takeover (an exec in place), the programs of the sessions it kept are still
 * its children, but libuv waits only for the children it spawned itself and
 * node-pty's waiting threads died with the old image. Each adopted pid is
 * collected here with `waitpid(pid, WNOHANG)`, on every SIGCHLD and on a slow
 * poll (a SIGCHLD of a child libuv reaped first says nothing of ours, and one
 * signal may stand for several exits).
 * @module
 */
import { readFileSync } from 'node:fs';
import { collectExit, type ChildExit } from './libc.ts';

/** The slow poll, against an exit whose SIGCHLD was taken by another listener's moment. */
const POLL_MS = 1_000;

const waiting = new Map<number, (exit: ChildExit | undefined) => void>();
let timer: NodeJS.Timeout | undefined;

function collect(): void {
  for (const [pid, resolve] of waiting) {
    const exit = collectExit(pid);
    if (exit === undefined) continue;
    waiting.delete(pid);
    // 'gone': reaped by something else, its status lost; told as undefined.
    resolve(exit === 'gone' ? undefined : exit);
  }
  if (waiting.size === 0) stop();
}

function stop(): void {
  process.off('SIGCHLD', collect);
  clearInterval(timer);
  timer = undefined;
}

/**
 * Resolves with the exit of child `pid` once it exited, or undefined when its
 * status cannot be had (it is no child of this process).
 */
export function waitForAdoptedChild(pid: number): Promise<ChildExit | undefined> {
  return new Promise((resolve) => {
    waiting.set(pid, resolve);
    if (timer === undefined) {
      process.on('SIGCHLD', collect);
      timer = setInterval(collect, POLL_MS);
      timer.unref();
    }
    // It may have exited before it was adopted: its zombie waits.
    setImmediate(collect);
  });
}

/**
 * After a takeover, before this image starts any child of its own: the
 * children of the previous image that are no session's (its session watcher,
 * the workers of other users, told to exit by the exec closing their pipes)
 * are collected once they exit, so that none stays a zombie. `sessions`: the
 * pids of the programs adopted, which are collected with their sessions.
 * Returns the pids it waits for (Linux; none where /proc does not list children).
 */
export function reapPreviousImageHelpers(sessions: ReadonlySet<number>): number[] {
  let listed: string;
  try {
    // After the exec this process has one thread, its main one, which the previous image's children belong to now.
    listed = readFileSync(`/proc/self/task/${process.pid}/children`, 'utf8');
  } catch (_error) {
    return [];
  }
  const helpers = listed
    .split(' ')
    .map(Number)
    .filter((pid) => Number.isSafeInteger(pid) && pid > 0 && !sessions.has(pid));
  for (const pid of helpers) void waitForAdoptedChild(pid);
  return helpers;
}
