/**
 * The takeover's control socket is the way to make the daemon exec a new
 * build, as its user (root, often): whoever may connect to it may name the
 * build. It is bound 0600 whatever the umask, so that no one connects in the
 * moment between the bind and a chmod (a connection made then stays open).
 */
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listenPrivately } from '../../service/src/server/takeover.ts';

const dir = mkdtempSync(join(tmpdir(), 'ew-control-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the control socket', () => {
  it('is bound 0600 under a umask that leaves everything open, and the umask is put back', async () => {
    const path = join(dir, 'takeover.sock');
    const before = process.umask(0);
    const server = createServer();
    try {
      let bound: number | undefined;
      // Runs before listenPrivately's own chmod: the mode the bind made.
      server.once('listening', () => (bound = statSync(path).mode & 0o777));
      await listenPrivately(server, path);
      expect(bound).toBe(0o600);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(process.umask(0)).toBe(0);
    } finally {
      process.umask(before);
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
