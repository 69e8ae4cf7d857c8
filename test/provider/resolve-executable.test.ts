import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import { platformFor } from '../../service/src/provider/platform/index.ts';

const windows = platformFor('win32');

const dir = mkdtempSync(join(tmpdir(), 'execworld-resolve-'));
const bin = join(dir, 'bin');
mkdirSync(bin);
writeFileSync(join(bin, 'tool'), '#!/bin/sh\n');
chmodSync(join(bin, 'tool'), 0o755);
writeFileSync(join(bin, 'plain'), 'not executable');
const runtime = new LocalRuntime();
afterAll(() => runtime.dispose());

describe('resolveExecutable', () => {
  it('verifies an absolute path', async () => {
    await expect(runtime.resolveExecutable('/bin/sh')).resolves.toBe('/bin/sh');
    await expect(runtime.resolveExecutable(join(dir, 'missing'))).rejects.toThrow(/is not an executable file/);
    await expect(runtime.resolveExecutable(bin)).rejects.toThrow(/is not an executable file/);
    await expect(runtime.resolveExecutable(join(bin, 'plain'))).rejects.toThrow(/is not an executable file/);
  });

  it('looks a bare name up on the scrubbed PATH plus explicit entries', async () => {
    await expect(runtime.resolveExecutable('tool', { PATH: bin })).resolves.toBe(join(bin, 'tool'));
    await expect(runtime.resolveExecutable('plain', { PATH: bin })).rejects.toThrow(/was not found on PATH/);
    await expect(runtime.resolveExecutable('sh')).resolves.toMatch(/\/sh$/);
  });

  it('rejects relative paths and empty commands', async () => {
    for (const command of ['./bin/x', 'node_modules/.bin/x']) {
      await expect(runtime.resolveExecutable(command)).rejects.toThrow(/is a relative path/);
    }
    await expect(runtime.resolveExecutable('')).rejects.toThrow(/must be non-empty/);
  });

  it('treats an empty PATH as the host cwd and resolves relative PATH entries from it', async () => {
    await expect(runtime.resolveExecutable('definitely-missing-tool', { PATH: '' })).rejects.toThrow(/was not found on PATH/);
    const fromCwd = relative(process.cwd(), bin);
    await expect(runtime.resolveExecutable('tool', { PATH: fromCwd })).resolves.toBe(join(bin, 'tool'));
  });

  it('rejects with exactly the abort reason', async () => {
    await expect(runtime.resolveExecutable('sh', undefined, AbortSignal.abort('stop'))).rejects.toBe('stop');
  });
});

describe('executable candidates under the Windows rules', () => {
  it('appends PATHEXT extensions to a name without one, and the exact PATH key wins', () => {
    expect(windows.executableCandidates('tool', { Path: '/bin', PathExt: '.EXE;.CMD' }, 'C:\\cwd')).toEqual(['C:\\bin\\tool.EXE', 'C:\\bin\\tool.CMD']);
    expect(windows.executableCandidates('tool', { Path: '/ambient', PATH: '/explicit', PATHEXT: '.EXE' }, 'C:\\cwd')).toEqual(['C:\\explicit\\tool.EXE']);
    expect(windows.executableCandidates('tool.exe', { PATH: '' }, 'C:\\cwd')).toEqual(['C:\\cwd\\tool.exe']);
  });

  it('uses the default PATHEXT and rejects backslash-relative paths', () => {
    expect(windows.executableCandidates('tool', { PATH: 'C:\\b' }, 'C:\\cwd')).toHaveLength(4);
    expect(() => windows.executableCandidates('bin\\x.exe', {})).toThrow(/is a relative path/);
  });
});
