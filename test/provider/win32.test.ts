/**
 * The Windows inspector, Job Object containment and tree control over a
 * replayed Windows process table (test/helpers/fake-kernel32.ts). The same
 * code runs against real Windows processes under Wine in the Windows lane
 * (test/windows/).
 */
import { describe, expect, it } from 'vitest';
import { JobObjectContainment } from '../../service/src/provider/containment/job-object.ts';
import { Win32Inspector } from '../../service/src/provider/inspect/win32.ts';
import { platformFor, type ManagedTree } from '../../service/src/provider/platform/index.ts';
import { WAIT_TIMEOUT } from '../../service/src/provider/win32/kernel32.ts';
import { WindowsProcesses } from '../../service/src/provider/win32/processes.ts';
import { FakeKernel32 } from '../helpers/fake-kernel32.ts';

function world(): { kernel32: FakeKernel32; processes: WindowsProcesses; inspector: Win32Inspector; taskkills: [number, boolean][] } {
  const kernel32 = new FakeKernel32();
  const taskkills: [number, boolean][] = [];
  const processes = new WindowsProcesses(kernel32, (pid, force) => taskkills.push([pid, force]));
  kernel32.spawn(4, 0, 'System');
  kernel32.spawn(100, 4, 'node.exe');
  return { kernel32, processes, inspector: new Win32Inspector(() => processes), taskkills };
}

describe('the Windows inspector', () => {
  it('reads the table with identities and parents, and closes every handle it opened', () => {
    const { kernel32, inspector } = world();
    kernel32.spawn(200, 100, 'pwsh.exe');
    kernel32.spawn(300, 200, 'cmd.exe');
    const rows = inspector.snapshot();
    expect(rows.map((row) => [row.identity.pid, row.ppid, row.name, row.alive])).toEqual([
      [4, 0, 'System', true],
      [100, 4, 'node.exe', true],
      [200, 100, 'pwsh.exe', true],
      [300, 200, 'cmd.exe', true],
    ]);
    expect(rows[2]!.identity.started).toMatch(/^\d+:\d+$/);
    expect(kernel32.open.size).toBe(0);
  });

  it('keeps an identity stable, tells a new process with a recycled pid apart, and flips liveness on exit', () => {
    const { kernel32, inspector } = world();
    kernel32.spawn(200, 100);
    const first = inspector.identity(200)!;
    expect(inspector.identity(200)).toEqual(first);
    expect(inspector.isAlive(first)).toBe(true);
    kernel32.exit(200);
    expect(inspector.isAlive(first)).toBe(false);
    expect(inspector.identity(200)).toBeUndefined();
    kernel32.spawn(200, 100);
    const second = inspector.identity(200)!;
    expect(second.started).not.toBe(first.started);
    expect(inspector.isAlive(first)).toBe(false);
    expect(inspector.isAlive(second)).toBe(true);
  });

  it.each([null, 0, -1, 0n, -1n, 0xffff_ffff_ffff_ffffn])('reads an invalid handle (%s) as unreadable, never alive', (invalid) => {
    const { kernel32, inspector } = world();
    kernel32.spawn(200, 100);
    const identity = inspector.identity(200)!;
    kernel32.invalid = { handle: invalid };
    expect(inspector.identity(200)).toBeUndefined();
    expect(inspector.isAlive(identity)).toBe(false);
    expect(inspector.groupHasLiveMembers(200)).toBeUndefined();
    expect(inspector.snapshot()).toEqual([]);
  });

  it('reads a failed wait as unreadable', () => {
    const { kernel32, inspector } = world();
    kernel32.spawn(200, 100);
    const identity = inspector.identity(200)!;
    kernel32.waitResult = 0xffff_ffff;
    expect(inspector.isAlive(identity)).toBe(false);
    kernel32.waitResult = WAIT_TIMEOUT;
    expect(inspector.isAlive(identity)).toBe(true);
  });

  it('has the shell as the pseudo group, no input-wait proof, and no clock ticks', () => {
    const { kernel32, inspector } = world();
    kernel32.spawn(200, 100, 'pwsh.exe');
    expect(inspector.exactInputWait).toBe(false);
    expect(inspector.foregroundGroup(200)).toBe(200);
    expect(inspector.inputWait()).toBeUndefined();
    expect(inspector.nowTicks()).toBeUndefined();
    expect(inspector.terminalDevice('conpty')).toEqual({ path: 'conpty' });
    expect(inspector.groupHasLiveMembers(200)).toBe(true);
    kernel32.exit(200);
    expect(inspector.groupHasLiveMembers(200)).toBe(false);
  });

  it('kills exactly the process an identity names, never the one that got its pid after it', () => {
    const { kernel32, inspector, taskkills } = world();
    kernel32.spawn(200, 100);
    const old = inspector.identity(200)!;
    kernel32.exit(200);
    const stranger = kernel32.spawn(200, 100);
    expect(inspector.signalProcess(old, 'SIGKILL')).toBe(false);
    expect(inspector.signalProcess(old, 'SIGTERM')).toBe(false);
    expect(stranger.running).toBe(true);
    expect(taskkills).toEqual([]);
    const current = inspector.identity(200)!;
    expect(inspector.signalProcess(current, 'SIGKILL')).toBe(true);
    expect(stranger).toMatchObject({ running: false, exitCode: 1 });
  });

  it('asks politely with taskkill /T for other signals, and adds /F for a group SIGKILL only', () => {
    const { kernel32, inspector, taskkills } = world();
    kernel32.spawn(200, 100);
    expect(inspector.signalProcess(inspector.identity(200)!, 'SIGTERM')).toBe(true);
    inspector.signalGroup(200, 'SIGTERM');
    inspector.signalGroup(200, 'SIGKILL');
    expect(taskkills).toEqual([
      [200, false],
      [200, false],
      [200, true],
    ]);
  });
});

describe('Job Object containment', () => {
  it('holds the tree, a detached grandchild included, and ends it whole', () => {
    const { kernel32, processes } = world();
    const cell = new JobObjectContainment(kernel32, processes).create('s-1')!;
    const root = cell.spawnInside(() => kernel32.spawn(200, 100, 'cmd.exe'));
    cell.attach(root.pid);
    const child = kernel32.spawn(300, 200);
    const grandchild = kernel32.spawn(400, 300);
    kernel32.exit(300);
    expect(cell.isEmpty()).toBe(false);
    expect(cell.pids().sort()).toEqual([200, 400]);
    cell.kill();
    expect([root.running, child.running, grandchild.running]).toEqual([false, false, false]);
    expect(grandchild.exitCode).toBe(1);
    expect(cell.isEmpty()).toBe(true);
    cell.remove();
    cell.remove();
    expect(kernel32.open.size).toBe(0);
  });

  it('ends what it holds when its handle closes (the daemon died)', () => {
    const { kernel32, processes } = world();
    const cell = new JobObjectContainment(kernel32, processes).create('s-1')!;
    cell.attach(kernel32.spawn(200, 100).pid);
    const child = kernel32.spawn(300, 200);
    cell.remove();
    expect(child.running).toBe(false);
  });

  it('adopts a child started before its parent was assigned, but not a stranger holding a recycled parent pid', () => {
    const { kernel32, processes } = world();
    const cell = new JobObjectContainment(kernel32, processes).create('s-1')!;
    // 500's parent pid 200 names the root only by coincidence: 500 is older than the root.
    const stranger = kernel32.spawn(500, 200);
    kernel32.processes.find((process) => process.pid === 500)!.ppid = 200;
    const root = kernel32.spawn(200, 100);
    const early = kernel32.spawn(300, 200);
    cell.attach(root.pid);
    expect(cell.pids()).toEqual([200]);
    cell.kill();
    expect(early.running).toBe(false);
    expect(stranger.running).toBe(true);
  });

  it('answers no cell where no job can be made, and the tree falls back on taskkill /T /F', () => {
    const { kernel32, processes, taskkills } = world();
    kernel32.failJobs = true;
    expect(new JobObjectContainment(kernel32, processes).create('s-1')).toBeUndefined();
    const tree = platformFor('win32', { kernel32, taskkill: (pid, force) => taskkills.push([pid, force]) }).tree;
    let exited = false;
    const view = treeView(200, undefined, () => exited);
    expect(tree.alive(view)).toBe(true);
    tree.signal(view, 'SIGTERM');
    expect(taskkills).toEqual([[200, true]]);
    exited = true;
    expect(tree.alive(view)).toBe(false);
  });

  it('falls back on the top-level process when it cannot be assigned', () => {
    const { kernel32, processes, taskkills } = world();
    kernel32.failAssign = true;
    const cell = new JobObjectContainment(kernel32, processes).create('s-1')!;
    const root = kernel32.spawn(200, 100);
    cell.attach(root.pid);
    expect(cell.isEmpty()).toBe(false);
    expect(cell.pids()).toEqual([200]);
    cell.kill();
    expect(taskkills).toEqual([[200, true]]);
    expect(root.running).toBe(false);
    expect(cell.isEmpty()).toBe(true);
  });

  it('the tree control ends the job for every signal and lives while the job has a member', () => {
    const { kernel32, processes } = world();
    const cell = new JobObjectContainment(kernel32, processes).create('s-1')!;
    const root = kernel32.spawn(200, 100);
    cell.attach(root.pid);
    const child = kernel32.spawn(300, 200);
    const tree = platformFor('win32', { kernel32 }).tree;
    expect(tree).toMatchObject({ detached: false, takesCells: true });
    kernel32.exit(200);
    const view = treeView(200, cell, () => true);
    expect(tree.alive(view)).toBe(true);
    tree.signal(view, 'SIGINT');
    expect(child).toMatchObject({ running: false, exitCode: 1 });
    expect(tree.alive(view)).toBe(false);
  });
});

function treeView(pid: number, cell: ManagedTree['cell'], rootExited: () => boolean): ManagedTree {
  return { pid, child: undefined, cell, rootExited, groupHasLiveMembers: () => undefined, processGroups: () => undefined };
}
