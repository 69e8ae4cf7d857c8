/**
 * A foreground asked right after the create, before the child has made its
 * session and taken its terminal, waits for that as a signal does, whichever
 * way the group is learnt: from the terminal's master (Linux), or from the
 * shell's process entry where the master cannot be asked.
 *
 * The child takes its terminal within microseconds of the spawn, so a late
 * one is stood for: the first three answers say "no group yet", as a master
 * (0) or an inspector (undefined) says it for a child that is not there yet.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import type * as Libc from '../../service/src/provider/posix/libc.ts';

const master = vi.hoisted(() => ({ asked: 0, late: 0, unavailable: false }));

vi.mock('../../service/src/provider/posix/libc.ts', async (importOriginal) => {
  const real = await importOriginal<typeof Libc>();
  return {
    ...real,
    terminalForegroundGroup: (fd: number): number | undefined => {
      if (master.unavailable) return undefined;
      master.asked += 1;
      return master.asked <= master.late ? 0 : real.terminalForegroundGroup(fd);
    },
  };
});

afterEach(() => {
  Object.assign(master, { asked: 0, late: 0, unavailable: false });
});

describe('a foreground asked right after the create', () => {
  it("waits for the child to take its terminal, asked on the terminal's master", async () => {
    master.late = 3;
    const local = new LocalRuntime();
    const terminal = await local.spawnTerminal({ argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 });
    try {
      const foreground = await terminal.inspectForeground();
      expect(master.asked).toBeGreaterThan(3);
      expect(foreground?.processGroupId).toBe(terminal.pid);
      // A signal asks the same way: SIGINT reaches cat, which ends.
      master.asked = 0;
      master.late = 0;
      expect(await terminal.signalForeground('SIGINT')).toBe(terminal.pid);
      expect(master.asked).toBeGreaterThan(0);
      expect((await terminal.done).signal).toBe('SIGINT');
    } finally {
      await local.dispose();
    }
  });

  it("waits for it where the master cannot be asked, by the shell's process entry", async () => {
    master.unavailable = true;
    /** The first three answers: no group yet. */
    class LateForegroundInspector extends LinuxInspector {
      asked = 0;
      override foregroundGroup(pid: number): number | undefined {
        this.asked += 1;
        return this.asked <= 3 ? undefined : super.foregroundGroup(pid);
      }
    }
    const inspector = new LateForegroundInspector();
    const local = new LocalRuntime({ inspector });
    const terminal = await local.spawnTerminal({ argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 });
    try {
      const foreground = await terminal.inspectForeground();
      expect(inspector.asked).toBeGreaterThan(3);
      expect(foreground?.processGroupId).toBe(terminal.pid);
    } finally {
      await local.dispose();
    }
  });
});
