/**
 * The sweep of a dead daemon's spill directories, attacked by the user whose
 * directory it removes: while the sweep runs (as root), the user's program
 * keeps swapping a subdirectory of its own for a link to a directory of
 * root's, hoping the sweep follows the link and deletes root's files.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepStaleSpillDirectories } from '../../service/src/provider/collector.ts';
import { removeTree } from '../../service/src/provider/fs/remove-tree.ts';
import { canMakeUsers, makeUser, startFlipper } from '../helpers/os-users.ts';
import { isCi, requiredTool } from '../helpers/tools.ts';

const VICTIMS = 20;

describe('removeTree', () => {
  it('removes files, links and nested directories, and never what a link leads to', async () => {
    const place = mkdtempSync(join(tmpdir(), 'ew-remove-'));
    const outside = join(place, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'kept'), 'kept');
    const tree = join(place, 'tree');
    mkdirSync(join(tree, 'a', 'b'), { recursive: true });
    writeFileSync(join(tree, 'a', 'b', 'file'), 'x');
    symlinkSync(outside, join(tree, 'a', 'link'));
    symlinkSync(join(outside, 'kept'), join(tree, 'file-link'));
    expect(await removeTree(tree)).toEqual([]);
    expect(existsSync(tree)).toBe(false);
    expect(readdirSync(outside)).toEqual(['kept']);
    // Nothing there is nothing to do.
    expect(await removeTree(tree)).toEqual([]);
  });
});

// Users are made as root; CI runs as root, so there a daemon that is not root fails these instead of skipping them.
describe.skipIf(!canMakeUsers && !isCi())("the sweep of a dead daemon's spill directories, attacked by their user", () => {
  let user: ReturnType<typeof makeUser>;
  beforeAll(() => {
    user = makeUser();
  });
  afterAll(() => user?.remove());

  it("never follows the user's links: root's files survive every round", async () => {
    requiredTool('cc').require();
    const place = mkdtempSync(join(tmpdir(), 'ew-sweep-'));
    chmodSync(place, 0o755);
    const victim = join(place, 'victim');
    mkdirSync(victim, { mode: 0o700 });
    for (let i = 0; i < VICTIMS; i += 1) writeFileSync(join(victim, `f${i}`), 'root', { mode: 0o600 });
    const spill = join(place, 'spill');
    mkdirSync(spill, { mode: 0o711 });
    // A pid no process has: the daemon that left the directory is dead.
    let dead = 4_000_000;
    while (existsSync(`/proc/${dead}`)) dead += 1;
    const stale = join(spill, `execworld-${dead}-AbC123`);
    /** The stale directory as an older daemon left it: its user's, holding a directory of the user's with as many files as the victim has. */
    const leave = (): void => {
      // Made whole as root, and given to the user from the bottom up: the user can change nothing in it before the last chown.
      mkdirSync(join(stale, 'd'), { recursive: true });
      const files = Array.from({ length: VICTIMS }, (_, i) => join(stale, 'd', `f${i}`));
      for (const file of files) writeFileSync(file, 'user');
      symlinkSync(victim, join(stale, 'l'));
      for (const path of [...files, join(stale, 'd'), stale]) chownSync(path, user.uid, user.gid);
    };
    leave();
    // The user's program, still running: it keeps exchanging d with a link to the victim, in one step each time.
    const swapper = startFlipper(user, join(stale, 'd'), join(stale, 'l'));
    try {
      for (let round = 0; round < 200; round += 1) {
        if (!existsSync(stale)) leave();
        await sweepStaleSpillDirectories(spill, (pid) => pid !== dead && existsSync(`/proc/${pid}`));
        expect(readdirSync(victim).length).toBe(VICTIMS);
      }
    } finally {
      swapper.kill('SIGKILL');
    }
    expect(readdirSync(victim).sort()).toEqual(Array.from({ length: VICTIMS }, (_, i) => `f${i}`).sort());
  });
});
