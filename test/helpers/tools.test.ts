/**
 * The switch for programs tests need (tools.ts): found on PATH or at a
 * candidate path; missing, it skips the tests with a reason, or with CI set
 * fails them.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isCi, requiredTool } from './tools.ts';

const scratch = mkdtempSync(join(tmpdir(), 'execworld-tools-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** An executable named `name` in a new directory of its own. */
function fakeProgram(name: string): { dir: string; path: string } {
  const dir = mkdtempSync(join(scratch, 'bin-'));
  const path = join(dir, name);
  writeFileSync(path, '#!/bin/sh\n');
  chmodSync(path, 0o755);
  return { dir, path };
}

const MISSING = 'execworld-no-such-program';

describe('requiredTool', () => {
  it('finds a program on PATH and runs the tests, CI or not', () => {
    const program = fakeProgram('ew-on-path');
    for (const CI of [undefined, 'true']) {
      const tool = requiredTool('ew-on-path', { env: { PATH: `${program.dir}:/usr/bin:/bin`, CI } });
      expect(tool).toMatchObject({ path: program.path, skip: false, note: '' });
      expect(tool.require()).toBe(program.path);
    }
  });

  it('finds a program off PATH at a candidate path, and ignores a candidate that is not executable', () => {
    const program = fakeProgram('ew-candidate');
    const plain = join(scratch, 'not-executable');
    writeFileSync(plain, '');
    const tool = requiredTool('ew-candidate', { candidates: [plain, program.path], env: { PATH: '/usr/bin:/bin' } });
    expect(tool.path).toBe(program.path);
    expect(requiredTool('ew-candidate', { candidates: [plain], env: { PATH: '/usr/bin:/bin' } }).path).toBeUndefined();
  });

  it('skips with the reason in the title when the program is missing and CI is not set', () => {
    const tool = requiredTool(MISSING, { candidates: ['/nonexistent/bin/x'], installedBy: 'the README', env: { PATH: '/usr/bin:/bin' } });
    expect(tool.skip).toBe(true);
    expect(tool.note).toBe(` (skipped: ${MISSING} not found (looked on PATH, /nonexistent/bin/x); see the README)`);
  });

  it('fails instead of skipping when the program is missing and CI is set', () => {
    const tool = requiredTool(MISSING, { env: { PATH: '/usr/bin:/bin', CI: 'true' } });
    expect(tool.skip).toBe(false);
    expect(tool.note).toContain('fails:');
    expect(() => tool.require()).toThrow(`${MISSING} not found (looked on PATH); CI is set, and .ci/run installs it`);
  });

  it('reads CI as set for any value but empty, false and 0', () => {
    expect([undefined, '', 'false', '0', 'true', '1', 'yes'].map((CI) => isCi({ CI }))).toEqual([false, false, false, false, true, true, true]);
  });
});
