import { describe, expect, it } from 'vitest';
import { DarwinInspector, parsePsTable } from '../../service/src/provider/inspect/darwin.ts';
import { platformFor } from '../../service/src/provider/platform/index.ts';
import { ProcessIndex } from '../../service/src/provider/inspect/inspector.ts';

const TABLE = [
  '    1     0     1 Ss   Mon Dec  1 09:00:00 2026',
  '  100     1   100 Ss   Mon Dec  1 09:00:01 2026',
  '  101   100   101 S+   Mon Dec  1 09:00:02 2026',
  '  102   101   101 Z+   Mon Dec  1 09:00:03 2026',
  'garbage line',
  '  200   201   200 S    Mon Dec  1 09:00:04 2026',
  '  201   200   200 S    Mon Dec  1 09:00:05 2026',
].join('\n');

const inspector = (responses: Record<string, string | undefined>): DarwinInspector => new DarwinInspector((file, args) => responses[[file, ...args].join(' ')]);

describe('DarwinInspector', () => {
  it('parses the ps table and skips malformed lines', () => {
    const rows = parsePsTable(TABLE);
    expect(rows.map((row) => row.identity.pid)).toEqual([1, 100, 101, 102, 200, 201]);
    expect(rows[1]).toMatchObject({ identity: { pid: 100, started: 'Mon Dec  1 09:00:01 2026' }, ppid: 1, pgrp: 100, alive: true });
    expect(rows[3]?.alive).toBe(false);
  });

  it('walks a tree with a parent cycle to an end', () => {
    const index = new ProcessIndex(parsePsTable(TABLE));
    expect(index.tree({ pid: 200, started: 'Mon Dec  1 09:00:04 2026' }).map((row) => row.identity.pid)).toEqual([201, 200]);
    expect(index.tree({ pid: 100, started: 'Mon Dec  1 09:00:01 2026' }).map((row) => row.identity.pid)).toEqual([102, 101, 100]);
  });

  it('reads the foreground group, undefined for -1 or a failed ps', () => {
    expect(inspector({ '/bin/ps -o tpgid= -p 100': ' 101\n' }).foregroundGroup(100)).toBe(101);
    expect(inspector({ '/bin/ps -o tpgid= -p 100': '  -1\n' }).foregroundGroup(100)).toBeUndefined();
    expect(inspector({}).foregroundGroup(100)).toBeUndefined();
  });

  it('never proves an input wait and lists no sessions', () => {
    const darwin = inspector({ '/bin/ps -axo pid=,ppid=,pgid=,stat=,lstart=': TABLE });
    expect(darwin.exactInputWait).toBe(false);
    expect(darwin.inputWait()).toBeUndefined();
    expect(darwin.snapshot().every((row) => row.session === undefined)).toBe(true);
    expect(darwin.isAlive({ pid: 101, started: 'Mon Dec  1 09:00:02 2026' })).toBe(true);
    expect(darwin.isAlive({ pid: 101, started: 'Mon Dec  1 09:00:09 2026' })).toBe(false);
    expect(darwin.isAlive({ pid: 102, started: 'Mon Dec  1 09:00:03 2026' })).toBe(false);
    expect(darwin.groupHasLiveMembers(101)).toBe(true);
  });
});

describe('createInspector', () => {
  it('refuses a platform it has no inspector for', () => {
    expect(() => platformFor('freebsd').createInspector()).toThrow('terminal inspection is unsupported on platform freebsd');
    expect(platformFor('linux').createInspector().platform).toBe('linux');
  });

  it('has a Windows inspector that, off Windows, says it cannot read the table', () => {
    expect(platformFor('win32').createInspector().platform).toBe('win32');
    expect(() => platformFor('win32').createInspector().snapshot()).toThrow(/kernel32 exists only on Windows, not linux/);
  });
});
