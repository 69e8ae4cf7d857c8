/**
 * The provider reads /proc and the cgroup files through one buffer it keeps
 * (kernel-text.ts): the whole text, however long, and the error of a file
 * that is not there.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { kernelTextOrUndefined, readKernelText } from '../../service/src/provider/kernel-text.ts';

describe('readKernelText', () => {
  test('reads a /proc file whole, as readFileSync does', () => {
    // mountinfo is read in pieces by the kernel (one mount per line of its seq_file).
    expect(readKernelText('/proc/self/mountinfo')).toBe(readFileSync('/proc/self/mountinfo', 'latin1'));
    expect(readKernelText('/proc/self/status')).toMatch(/^Pid:\s+\d+$/m);
  });

  test('reads a file larger than its buffer whole, and a small one after it', () => {
    const directory = mkdtempSync(join(tmpdir(), 'kernel-text-'));
    try {
      // 100 KiB of distinct lines: a lost or repeated piece shows.
      const large = Array.from({ length: 5000 }, (_, index) => `line ${String(index).padStart(12, '0')}`).join('\n');
      writeFileSync(join(directory, 'large'), large);
      writeFileSync(join(directory, 'small'), 'populated 0\n');
      expect(readKernelText(join(directory, 'large'))).toBe(large);
      expect(readKernelText(join(directory, 'small'))).toBe('populated 0\n');
      expect(readKernelText(join(directory, 'large'))).toBe(large);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  test("throws a missing file's ENOENT, which kernelTextOrUndefined answers as undefined", () => {
    expect(() => readKernelText('/proc/self/no-such-file')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(kernelTextOrUndefined('/proc/self/no-such-file')).toBeUndefined();
    expect(kernelTextOrUndefined('/proc/self/stat')).toMatch(/^\d+ \(/);
  });
});
