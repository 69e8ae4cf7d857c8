/**
 * A user's file worker killed from outside, before its end is seen: the next
 * call's request meets a dead channel, which the worker never read, so a new
 * worker makes the call instead of the call failing. Runs as root (the worker
 * drops to `nobody`).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { UserWorkers } from '../../service/src/provider/fs/worker-files.ts';
import { waitFor } from '../helpers/wait.ts';

const NOBODY = { name: 'nobody', uid: 65534, gid: 65534 };
const rootOnly = process.getuid?.() !== 0;

/** The state letter of `pid` in /proc (Z: exited, not yet reaped), or undefined once it is gone. */
function stateOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0];
  } catch (_error) {
    return undefined;
  }
}

/**
 * Runs `calls` with a user's worker that answered one call and was then
 * killed, its end not yet seen by this process (a zombie, no SIGCHLD or
 * disconnect handled): `digest` is that call again, `first` its answer.
 * Answers the pids of the workers started.
 */
async function afterAnUnseenKill(calls: (digest: () => Promise<unknown>, first: unknown) => Promise<void>): Promise<number[]> {
  const pids: number[] = [];
  const workers = new UserWorkers({}, (pid) => pids.push(pid));
  const worker = workers.of(NOBODY)!;
  const digest = () => worker.call('digest', undefined, '/etc/hostname', {});
  try {
    const first = await digest();
    const killed = pids.at(-1)!;
    process.kill(killed, 'SIGKILL');
    // Synchronously, so that this process sees nothing of the end (no SIGCHLD, no disconnect) before the next call.
    const deadline = Date.now() + 30_000;
    while (stateOf(killed) !== 'Z' && stateOf(killed) !== undefined && Date.now() < deadline);
    expect(stateOf(killed)).toBe('Z');
    await calls(digest, first);
  } finally {
    await workers.close();
  }
  return pids;
}

/** The bytes waiting unread in the channel of the worker `pid` (its descriptor 3, stdio's 'ipc'; the socket's receive queue, as ss tells it). */
function unread(pid: number): number {
  const line = execFileSync('ss', ['-xpn'], { encoding: 'utf8' })
    .split('\n')
    .find((row) => row.includes(`pid=${pid},fd=3)`));
  return line === undefined ? 0 : Number(line.trim().split(/\s+/)[2]);
}

describe.skipIf(rootOnly)('a file worker killed from outside', () => {
  test('has the next call made by a new worker when the request met its dead channel', async () => {
    const pids = await afterAnUnseenKill(async (digest, first) => {
      expect(await digest()).toEqual(first);
    });
    expect(pids).toHaveLength(2);
  });

  test('has every call made by a new worker when several meet its dead channel, one after another', async () => {
    await afterAnUnseenKill(async (digest, first) => {
      // Calls made at different points of the turns that follow: the first one's failure to reach the worker,
      // handled, must not fail the others, which never reached it either.
      const calls = [digest()];
      await Promise.resolve();
      calls.push(digest());
      await new Promise((resolve) => process.nextTick(resolve));
      calls.push(digest());
      await new Promise((resolve) => process.nextTick(resolve));
      await Promise.resolve();
      calls.push(digest());
      await new Promise((resolve) => setImmediate(resolve));
      calls.push(digest());
      expect(await Promise.all(calls)).toEqual(Array(calls.length).fill(first));
    });
  });

  test('has a call that changes nothing made again by a new worker when the worker that had it ends without answering', async () => {
    const pids: number[] = [];
    const workers = new UserWorkers({}, (pid) => pids.push(pid));
    const worker = workers.of(NOBODY)!;
    try {
      const first = await worker.call('digest', undefined, '/etc/hostname', {});
      // Stopped, the worker takes the requests into its channel and answers none; then it is killed.
      const stopped = pids.at(-1)!;
      process.kill(stopped, 'SIGSTOP');
      const sent = (request: Promise<unknown>): Promise<PromiseSettledResult<unknown>> => Promise.allSettled([request]).then(([settled]) => settled);
      // Each request is in the worker's channel, unread, before the next is made and before the worker ends.
      const digest = sent(worker.call('digest', undefined, '/etc/hostname', {}));
      await waitFor('the first request to be in the channel', () => unread(stopped) > 0);
      const one = unread(stopped);
      const made = sent(worker.call('mkdir', undefined, '/tmp/execworld-lost-mkdir', { parents: false }));
      await waitFor('the second request to be in the channel', () => unread(stopped) > one);
      process.kill(stopped, 'SIGKILL');
      expect(await digest).toEqual({ status: 'fulfilled', value: first });
      // A call that changes something may have been made: it fails, naming the worker's end.
      expect(await made).toMatchObject({
        status: 'rejected',
        reason: { code: 'FS_IO_ERROR', message: expect.stringMatching(/^the file worker of user nobody /) as string },
      });
      expect(pids).toHaveLength(2);
    } finally {
      await workers.close();
    }
  });
});
