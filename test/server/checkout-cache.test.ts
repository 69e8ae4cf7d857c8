/**
 * A daemon run from a checkout compiles its TypeScript as it starts. It keeps
 * nothing in the shared temporary directory, and removes nothing there: a
 * compile cache there would be trusted though another user made its
 * directory first (code this process would run), and an old cache would be
 * removed by path, following a link another user swapped in.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { daemonProcessTest } from '../helpers/daemon-test.ts';

const test = daemonProcessTest();

const scratch = mkdtempSync(join(tmpdir(), 'ew-checkout-cache-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a daemon run from a checkout', () => {
  test('keeps no compile cache in the temporary directory, nor removes one there', async ({ spawnDaemon }) => {
    // A temporary directory anyone may write (as /tmp), where another user made tsx's directories first.
    const shared = join(scratch, 'tmp');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const uid = process.getuid?.() ?? 0;
    const someoneElse = uid === 0 ? 65_534 : uid;
    for (const name of ['tsx', `tsx-${uid}`]) {
      mkdirSync(join(shared, name));
      writeFileSync(join(shared, name, 'planted'), 'theirs');
      if (uid === 0) chownSync(join(shared, name), someoneElse, someoneElse);
    }
    const daemon = await spawnDaemon([], [], { env: { TMPDIR: shared } });
    try {
      // A file call starts more of the daemon's code (its file views): compiled too.
      const answer = await fetch(`${daemon.url}/v1/fs/stat`, {
        method: 'POST',
        headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ path: '/tmp' }),
      });
      expect(answer.status).toBe(200);
    } finally {
      await daemon.stop();
    }
    expect(readdirSync(join(shared, 'tsx'))).toEqual(['planted']);
    expect(readdirSync(join(shared, `tsx-${uid}`))).toEqual(['planted']);
    expect(readdirSync(shared).sort()).toEqual(['tsx', `tsx-${uid}`]);
    expect(existsSync(join(shared, 'tsx', 'planted'))).toBe(true);
  });
});
