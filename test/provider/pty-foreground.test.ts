/**
 * A terminal's foreground group, asked of the kernel on the master (one
 * ioctl, on the path of every signal and foreground probe) rather than read
 * from the session leader's process entry: the two agree while the shell
 * runs its own commands and a job of its own, and the master says none once
 * the leader is gone.
 */
import { closeSync, readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { duplicateDescriptor, terminalForegroundGroup } from '../../service/src/provider/posix/libc.ts';
import { shellPty } from '../helpers/pty.ts';
import { waitFor } from '../helpers/wait.ts';

/** Fields of `/proc/<pid>/stat` after the command's closing parenthesis: state is [0], pgrp [2], tpgid [5]. */
function statFields(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  } catch (_error) {
    return undefined;
  }
}

describe('UnixPty.foregroundGroup', () => {
  test("is the group the shell's process entry names, before and after a job takes the terminal, and none once the shell is gone", async () => {
    // Job control: the shell reads in its own group, then runs sleep as a foreground job of its own.
    const { pty, output, exit } = shellPty('set -m; printf READY; read x; sleep 30');
    let master: number | undefined;
    try {
      await waitFor('the shell to be ready', () => output().includes('READY'));
      await waitFor('the shell to hold the terminal', () => pty.foregroundGroup() === pty.pid);
      expect(Number(statFields(pty.pid)![5])).toBe(pty.pid);

      await pty.write('go\n');
      await waitFor('a job to take the terminal', () => (pty.foregroundGroup() ?? 0) > 0 && pty.foregroundGroup() !== pty.pid);
      const job = pty.foregroundGroup()!;
      expect(Number(statFields(pty.pid)![5])).toBe(job);
      // The group is sleep's own: its leader is the sleep the shell started.
      expect(readFileSync(`/proc/${job}/comm`, 'utf8').trim()).toBe('sleep');
      expect(Number(statFields(job)![2])).toBe(job);

      // A copy of the master keeps it open after the shell dies, whatever the pty does with its own.
      master = duplicateDescriptor(pty.fd);
      process.kill(pty.pid, 'SIGKILL');
      await waitFor('the shell to be gone', () => {
        const state = statFields(pty.pid)?.[0];
        return state === undefined || state === 'Z';
      });
      expect(terminalForegroundGroup(master)).toBe(0);
      // The pty's own master closes once the terminal hung up: it is no longer asked.
      await waitFor('the shell to end', () => exit() !== undefined);
      expect(pty.open).toBe(false);
      expect(pty.foregroundGroup()).toBeUndefined();
    } finally {
      if (master !== undefined) closeSync(master);
      if (exit() === undefined) pty.kill('SIGKILL');
      await waitFor('the shell to end', () => exit() !== undefined);
    }
  });

  test('answers undefined for a descriptor it cannot ask', () => {
    expect(terminalForegroundGroup(-1)).toBeUndefined();
  });
});
