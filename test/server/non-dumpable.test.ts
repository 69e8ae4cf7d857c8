/**
 * The daemon is non-dumpable: a program it runs, under the same uid, cannot
 * read the daemon's environment (its secrets) through /proc.
 */
import { describe, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { BIN } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';

const test = daemonProcessTest();
const NOBODY = 65_534;
const asRoot = process.getuid?.() === 0;
/** Whether that user can read the daemon's sources here (a checkout under a 0700 directory cannot). */
const reachable = asRoot && spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', 'test', '-r', BIN]).status === 0;

describe('the daemon as seen by its own children', () => {
  // Root reads every process's /proc entries; the check needs the daemon under an ordinary uid,
  // which needs a checkout that uid can read.
  test.skipIf(!reachable)('cannot have its environment read through /proc/$PPID/environ', async ({ spawnDaemon }) => {
    const daemon = await spawnDaemon([], [], { uid: NOBODY });
    const headers = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' };
    const created = (await (
      await fetch(`${daemon.url}/v1/processes`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          argv: [
            '/bin/sh',
            '-c',
            'id -u; test "$PPID" = "$0" && echo parent-is-daemon; cat /proc/$PPID/environ >/dev/null && echo READABLE || echo refused',
            String(daemon.pid),
          ],
          cwd: '/tmp',
          stdio: { stdin: 'ignore', stdout: { maxBytes: 4096 }, stderr: { maxBytes: 4096 } },
          graceMs: 1000,
        }),
      })
    ).json()) as { id: string };
    await fetch(`${daemon.url}/v1/processes/${created.id}/done?timeoutMs=20000`, { headers });
    const read = (await (await fetch(`${daemon.url}/v1/processes/${created.id}/collected/stdout?from=0`, { headers })).json()) as { text: string };
    expect(read.text).toBe(`${NOBODY}\nparent-is-daemon\nrefused\n`);
  });
});
