import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import { fileModesGuardPrivacy } from '../../service/src/platform-facts.ts';
import type { SessionCell } from '../../service/src/provider/containment/containment.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { hostPlatform, platformFor, type ManagedTree } from '../../service/src/provider/platform/index.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

/** Children of this test, killed after each test whatever happened. */
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

/** A real child leading its own process group, with what its exit was. */
function spawnLeader(script: string): { child: ChildProcess; exited: () => boolean; exit: Promise<unknown> } {
  const child = spawn('/bin/sh', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  started.push(child);
  let exited = false;
  const exit = once(child, 'exit').then((args) => {
    exited = true;
    return args;
  });
  return { child, exited: () => exited, exit };
}

function treeOf(child: ChildProcess, extra: Partial<ManagedTree> = {}): ManagedTree {
  return {
    pid: child.pid!,
    child,
    cell: undefined,
    rootExited: () => child.exitCode !== null || child.signalCode !== null,
    groupHasLiveMembers: (pgid) => new LinuxInspector().groupHasLiveMembers(pgid),
    processGroups: () => undefined,
    ...extra,
  };
}

async function firstLine(child: ChildProcess): Promise<string> {
  let text = '';
  for await (const chunk of child.stdout!) {
    text += String(chunk);
    if (text.includes('\n')) break;
  }
  return text.trim();
}

describe('platform selection', () => {
  it('chooses the Windows rules for win32 and the POSIX rules for every other platform', () => {
    const windows = platformFor('win32');
    expect([windows.name, windows.caseInsensitiveEnv, windows.tree.detached, windows.tree.takesCells]).toEqual(['win32', true, false, true]);
    for (const name of ['linux', 'darwin', 'freebsd'] as const) {
      const posix = platformFor(name);
      expect([posix.name, posix.caseInsensitiveEnv, posix.tree.detached, posix.tree.takesCells]).toEqual([name, false, true, true]);
    }
    expect(hostPlatform.name).toBe(process.platform);
  });

  it('gives each platform its own inspector, and none where there is none', () => {
    expect(platformFor('linux').createInspector().platform).toBe('linux');
    expect(platformFor('darwin').createInspector().platform).toBe('darwin');
    // The Windows inspector reads kernel32, which exists only on Windows: off it, the first read says so.
    expect(platformFor('win32').createInspector().platform).toBe('win32');
    expect(() => platformFor('win32').createInspector().snapshot()).toThrow(/Windows process table cannot be read: kernel32 exists only on Windows/);
    expect(() => platformFor('freebsd').createInspector()).toThrow(/unsupported on platform freebsd/);
  });

  it('looks executables up with the path rules of each platform', () => {
    expect(platformFor('linux').executableCandidates('tool', { PATH: '/a:/b', Path: '/ignored' }, '/cwd')).toEqual(['/a/tool', '/b/tool']);
    expect(() => platformFor('linux').executableCandidates('bin/tool', {}, '/cwd')).toThrow(/is a relative path/);
    expect(platformFor('win32').executableCandidates('tool.exe', { Path: 'C:\\a;C:\\b' }, 'C:\\cwd')).toEqual(['C:\\a\\tool.exe', 'C:\\b\\tool.exe']);
  });

  it('tells the server side whether file modes guard a private file', () => {
    expect(fileModesGuardPrivacy('win32')).toBe(false);
    expect(fileModesGuardPrivacy('linux')).toBe(true);
    expect(fileModesGuardPrivacy('darwin')).toBe(true);
    expect(fileModesGuardPrivacy()).toBe(process.platform !== 'win32');
  });
});

describe('the Windows strategy', () => {
  it('kills with the injected taskkill, and the tree lives exactly as long as its top-level process', async () => {
    const killed: number[] = [];
    const tree = platformFor('win32', { taskkill: (pid) => killed.push(pid) }).tree;
    const { child, exit } = spawnLeader('exec sleep 30');
    const view = treeOf(child);
    expect(tree.alive(view)).toBe(true);
    tree.signal(view, 'SIGTERM');
    tree.signal(view, 'SIGKILL');
    expect(killed).toEqual([child.pid, child.pid]);
    expect(tree.alive(view)).toBe(true);
    child.kill('SIGKILL');
    await exit;
    expect(tree.alive(view)).toBe(false);
  });

  it('merges environment names case-insensitively, where the POSIX rules keep both', async () => {
    const ambientEnv = { PATH: '/bin', Probe: 'ambient' };
    const windows = new LocalRuntime({ platform: 'win32', ambientEnv });
    const linux = new LocalRuntime({ platform: 'linux', ambientEnv });
    expect(windows.childEnvironment({ PROBE: 'explicit' })).toEqual({ PATH: '/bin', PROBE: 'explicit' });
    expect(linux.childEnvironment({ PROBE: 'explicit' })).toEqual({ PATH: '/bin', Probe: 'ambient', PROBE: 'explicit' });
    await Promise.all([windows.dispose(), linux.dispose()]);
  });
});

describe('the POSIX strategy, with real processes', () => {
  it('signals the whole process group, not only its leader', async () => {
    const tree = platformFor('linux').tree;
    // The shell waits for its background sleep, a member of its group.
    const { child, exit } = spawnLeader('sleep 30 & echo $!; wait');
    const member = Number(await firstLine(child));
    const view = treeOf(child);
    expect(tree.alive(view)).toBe(true);
    tree.signal(view, 'SIGTERM');
    await exit;
    await waitFor('the group member to end', () => !pidAlive(member));
    await waitFor('the tree to be seen gone', () => !tree.alive(view));
  });

  it('asks the process table about a group whose leader exited on Linux only', () => {
    // A live group whose leader the view claims exited: only a table that says "no live member" ends it.
    const { child } = spawnLeader('exec sleep 30');
    for (const [name, asked] of [
      ['linux', true],
      ['darwin', false],
    ] as const) {
      const groupHasLiveMembers = vi.fn(() => false);
      const view = treeOf(child, { rootExited: () => true, groupHasLiveMembers });
      expect(platformFor(name).tree.alive(view)).toBe(!asked);
      expect(groupHasLiveMembers.mock.calls).toEqual(asked ? [[child.pid]] : []);
    }
  });

  it('signals members of the cell that left the group, and kills a cell whole with SIGKILL', async () => {
    const tree = platformFor('linux').tree;
    const leader = spawnLeader('exec sleep 30');
    const escapee = spawnLeader('exec sleep 30');
    const kill = vi.fn();
    const cell: SessionCell = {
      key: 'test',
      complete: false,
      spawnInside: (start) => start(),
      attach: () => {},
      isEmpty: () => leader.exited() && escapee.exited(),
      pids: () => [leader.child.pid!, escapee.child.pid!],
      kill,
      remove: () => {},
    };
    const groups = new Map([
      [leader.child.pid!, leader.child.pid],
      [escapee.child.pid!, escapee.child.pid],
    ]);
    const view = treeOf(leader.child, { cell, processGroups: () => groups });
    tree.signal(view, 'SIGKILL');
    expect(kill).toHaveBeenCalledTimes(1);
    await leader.exit;
    expect(escapee.exited()).toBe(false);
    expect(tree.alive(view)).toBe(true);
    tree.signal(view, 'SIGTERM');
    await escapee.exit;
    expect(escapee.child.signalCode).toBe('SIGTERM');
    expect(tree.alive(view)).toBe(false);
  });

  it('leaves an injected taskkill unused: it belongs to the Windows strategy', async () => {
    const taskkill = vi.fn();
    const runtime = new LocalRuntime({ windows: { taskkill }, containment: 'none' });
    expect(runtime.platform).toBe(process.platform);
    const handle = runtime.spawn({
      argv: ['/bin/sh', '-c', 'sleep 30'],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
      graceMs: 5000,
    });
    handle.terminate();
    await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
    await handle.waitForExit();
    expect(taskkill).not.toHaveBeenCalled();
    await runtime.dispose();
  });
});
