/**
 * `POST /v1/run`: one command run to completion over REST, on a process
 * session of the daemon: listed while it runs, forgotten once answered, its
 * output bounded, its timeout and its caller's going away ending its whole
 * tree, and an owner mapped to an OS user running it as that user, at home.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { connect } from '@execworld/sdk';
import { DEFAULT_RUN_OUTPUT_BYTES } from '@execworld/sdk/seam';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { canMakeUsers, makeUser } from '../helpers/os-users.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const CAROL = 'carol-token-0123456789abcdefg';

let daemon: TestDaemon;
let carol: ReturnType<typeof makeUser> | undefined;
const scratch = mkdtempSync(join(tmpdir(), 'ew-run-rest-'));

const test = daemonTest(() => [{}, { owners: carol === undefined ? [] : [{ owner: 'carol', token: CAROL, user: carol }] }]);

test.beforeAll(() => {
  carol = canMakeUsers ? makeUser() : undefined;
});
test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});
test.afterAll(() => {
  carol?.remove();
});

const run = (body: Record<string, unknown>, token = ALICE) => daemon.request('POST', '/v1/run', { body, token });

/** The owner's processes the daemon lists. */
async function processes(): Promise<{ id: string; status: string; argv: string[] }[]> {
  return (await daemon.request('GET', '/v1/processes')).body.processes;
}

describe('POST /v1/run', () => {
  test('runs a command line through /bin/sh and answers its exit, output and duration', async () => {
    const answer = await run({ command: 'echo out; echo err >&2; exit 3' });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toMatchObject({ exitCode: 3, signal: null, stdout: 'out\n', stderr: 'err\n', truncated: null, timedOut: false });
    expect(typeof answer.body.durationMs).toBe('number');
  });

  test('runs an argv as it is, with its cwd, env and stdin', async () => {
    const answer = await run({ argv: ['/bin/sh', '-c', 'pwd; echo "$V"; cat', 'ignored'], cwd: '/', env: { V: '$HOME' }, stdin: 'in\n' });
    expect(answer.body).toMatchObject({ exitCode: 0, stdout: '/\n$HOME\nin\n' });
  });

  test("runs in the daemon's working directory when no cwd is given", async () => {
    expect((await run({ command: 'pwd' })).body.stdout).toBe(`${process.cwd()}\n`);
  });

  test('keeps the head and tail of long output and counts the bytes cut', async () => {
    const answer = await run({ command: "head -c 1000000 /dev/zero | tr '\\0' a; printf END", maxOutputBytes: 100 });
    expect(answer.body.stdout).toBe(`${'a'.repeat(97)}END`);
    expect(answer.body.truncated).toEqual({ stdout: 1_000_003 - 100, stderr: 0 });
  });

  test('keeps 1 MiB of each stream by default, however long the output (figures printed)', async () => {
    const total = 100_000_000;
    const command = `head -c ${total} /dev/zero | tr '\\0' a`;
    const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);
    const rssBefore = process.memoryUsage().rss;
    const answer = await run({ command });
    const rssRest = process.memoryUsage().rss;
    expect(answer.body.stdout).toHaveLength(DEFAULT_RUN_OUTPUT_BYTES);
    expect(answer.body.truncated).toEqual({ stdout: total - DEFAULT_RUN_OUTPUT_BYTES, stderr: 0 });
    const runtime = await connect(daemon.url, { token: ALICE });
    try {
      const result = await runtime.run(command);
      expect(result.stdout).toHaveLength(DEFAULT_RUN_OUTPUT_BYTES);
      const rssSdk = process.memoryUsage().rss;
      console.log(
        `${total / 1e6} MB of output: POST /v1/run answered in ${answer.body.durationMs} ms (${(total / 1e3 / answer.body.durationMs).toFixed(0)} MB/s), ` +
          `runtime.run (remote) in ${result.durationMs} ms (${(total / 1e3 / result.durationMs).toFixed(0)} MB/s); ` +
          `RSS of this process (daemon and client) ${mib(rssBefore)} MiB before, ${mib(rssRest)} after the REST run, ${mib(rssSdk)} after the SDK run`,
      );
    } finally {
      await runtime.dispose();
    }
  }, 120_000);

  test('ends the process tree at the timeout and says so', async () => {
    const answer = await run({ command: 'echo $$; sleep 30 & echo $!; wait', timeoutMs: 300, graceMs: 300 });
    expect(answer.body).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGTERM' });
    const pids = (answer.body.stdout as string).trim().split('\n').map(Number);
    expect(pids).toHaveLength(2);
    expect(pids.filter(pidAlive)).toEqual([]);
  });

  test('is a process session of the owner while it runs, and is forgotten once answered', async () => {
    const go = join(scratch, 'go');
    const command = `while [ ! -e ${go} ]; do sleep 0.02; done; echo done`;
    const answer = run({ command });
    await waitFor('the run among the processes', async () => (await processes()).some((entry) => entry.argv.includes(command) && entry.status === 'running'));
    writeFileSync(go, '');
    expect((await answer).body).toMatchObject({ exitCode: 0, stdout: 'done\n' });
    expect((await processes()).filter((entry) => entry.argv.includes(command))).toEqual([]);
  });

  test('ends the whole tree when the caller goes away, leaving no process behind', async () => {
    const pidFile = join(scratch, 'pids');
    const command = `echo $$ > ${pidFile}; sleep 300 & echo $! >> ${pidFile}; wait`;
    const controller = new AbortController();
    const request = fetch(`${daemon.url}/v1/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
      body: JSON.stringify({ command, graceMs: 300 }),
      signal: controller.signal,
    });
    request.catch(() => undefined);
    const pids = (): number[] =>
      (() => {
        try {
          return readFileSync(pidFile, 'utf8').trim().split('\n').filter(Boolean).map(Number);
        } catch (_error) {
          return [];
        }
      })();
    await waitFor('both pids', () => pids().length === 2);
    expect(pids().every(pidAlive)).toBe(true);
    controller.abort();
    await waitFor('the tree to end', () => pids().filter(pidAlive).length === 0);
    await waitFor('the session to be forgotten', async () => !(await processes()).some((entry) => entry.argv.includes(command)));
  });

  test('refuses bad input with a 400 naming what was wrong', async () => {
    for (const [body, message] of [
      [{}, /argv or a command line as command/],
      [{ command: 'true', argv: ['true'] }, /argv or a command line as command/],
      [{ command: 'true', maxOutputBytes: 1 }, /maxOutputBytes/],
      [{ command: 'true', timeoutMs: 0 }, /timeoutMs/],
      [{ command: '' }, /command/],
    ] as const) {
      const answer = await run(body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.error.code).toBe('INVALID_ARGUMENT');
      expect(answer.body.error.message).toMatch(message);
    }
  });

  test.skipIf(!canMakeUsers)('runs as the OS user of a mapped owner, in its home', async () => {
    const answer = await run({ command: 'id -un; pwd' }, CAROL);
    expect(answer.body).toMatchObject({ exitCode: 0, stdout: `${carol!.name}\n${carol!.home}\n` });
  });
});
