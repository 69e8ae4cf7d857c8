/**
 * What a terminal's master holds, counted without reading it: a read of an
 * empty master waits in the kernel for the line discipline's pending work,
 * which kept the daemon's event loop in read() while a program wrote in
 * bulk; the pty stops coalescing a chunk where the count says nothing waits.
 */
import { readSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { bytesReadable } from '../../service/src/provider/posix/libc.ts';
import { shellPty } from '../helpers/pty.ts';
import { waitFor } from '../helpers/wait.ts';

describe('bytesReadable', () => {
  test("counts what a terminal's master holds, without taking it", async () => {
    // Raw and silent: what the master holds is exactly what the program printed.
    const { pty, output, exit } = shellPty('stty raw -echo; printf READY; read x; printf 0123456789; sleep 30');
    try {
      await waitFor('the program to be ready', () => output().includes('READY'));
      // No longer read by the pty: what the program prints next stays in the master.
      pty.handOver();
      expect(bytesReadable(pty.fd)).toBe(0);
      await pty.write('go\n');
      await waitFor('ten bytes waiting in the master', () => bytesReadable(pty.fd) === 10);
      const buffer = Buffer.alloc(64);
      expect(buffer.toString('latin1', 0, readSync(pty.fd, buffer, 0, 64, null))).toBe('0123456789');
      expect(bytesReadable(pty.fd)).toBe(0);
    } finally {
      pty.kill('SIGKILL');
      pty.resumeAfterHandOver();
      await waitFor('the program to end', () => exit() !== undefined);
    }
  });

  test('answers undefined for a descriptor it cannot ask', () => {
    expect(bytesReadable(-1)).toBeUndefined();
  });
});
