/**
 * `npm start`, as the README tells people to run the daemon: npm runs the
 * script through `sh -c` and forwards SIGTERM to that child. The script execs
 * the daemon, so the signal reaches the daemon itself, which ends every
 * session and exits 0, and npm with it; nothing of the tree is left.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { treePids } from '../helpers/proc.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let leftovers: number[] = [];
afterEach(() => {
  // Whatever a failed run left behind is not left on the machine.
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (_error) {
      // Already gone.
    }
  }
});

describe('npm start', () => {
  it('passes SIGTERM to the daemon, which ends every session and exits 0, leaving no process of the tree', async () => {
    const home = mkdtempSync(join(tmpdir(), 'execworld-npm-start-'));
    const npm: ChildProcess = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...process.env, XDG_CONFIG_HOME: home, EXECWORLD_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let logs = '';
    npm.stdout!.on('data', (chunk: Buffer) => (logs += chunk.toString()));
    npm.stderr!.on('data', (chunk: Buffer) => (logs += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    await waitFor('the daemon to listen', () => /"address":"http:\/\/[^"]+"/.test(logs), 30_000);
    const url = /"address":"(http:\/\/[^"]+)"/.exec(logs)![1]!;
    const token = readFileSync(join(home, 'execworld', 'token'), 'utf8').trim();
    const call = async (method: string, path: string, body?: unknown): Promise<any> =>
      (
        await fetch(`${url}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        })
      ).json();

    // A shell with a job of its own, so that the tree is more than the daemon.
    const shell = await call('POST', '/v1/terminals', {
      argv: ['/bin/sh', '-c', 'sleep 300 & echo "job=$!"; wait'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 500,
    });
    let job = 0;
    await waitFor('the job', async () => {
      const output = await call('GET', `/v1/terminals/${shell.id}/output?from=0`);
      job = Number(/job=(\d+)/.exec(Buffer.from(output.data, 'base64').toString())?.[1] ?? 0);
      return job > 0;
    });
    const tree = treePids(npm.pid!);
    leftovers = tree;
    expect(tree).toEqual(expect.arrayContaining([shell.pid, job]));
    // npm's child is the daemon itself: the shell of the script was replaced by it.
    const [daemon] = tree.filter((pid) => Number(readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]!.split(' ')[1]) === npm.pid);
    expect(readFileSync(`/proc/${daemon}/cmdline`, 'utf8').split('\0')).toContain('serve');

    npm.kill('SIGTERM');
    expect(await exited).toBe(0);
    await waitFor('every process of the tree to be gone', () => tree.every((pid) => !pidAlive(pid)), 20_000);
    expect(logs).toContain('every session ended; exiting');
    // npm, tsx and the daemon start slowly on a loaded machine: the waits above have their own deadlines.
  }, 120_000);
});
