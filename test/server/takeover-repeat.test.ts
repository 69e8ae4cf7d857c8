/**
 * Twenty takeovers in a row (the slow lane: about two minutes on a loaded
 * two-core machine) while a terminal and processes print, a program reads
 * its stdin and a shell is in the middle of a command at each: no descriptor
 * is left behind, no zombie, every stream is whole and in order. The
 * daemon's descriptors, resident memory and pause are printed after each.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'vitest';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { repeatTakeovers } from '../helpers/takeover.ts';

const test = daemonProcessTest();

describe('serve --takeover, twenty times', () => {
  test('leaves no descriptor, zombie or lost byte behind', { timeout: 600_000 }, async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    await repeatTakeovers(daemon, stateDir, 20);
  });
});
