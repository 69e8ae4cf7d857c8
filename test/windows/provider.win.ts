/**
 * The Windows provider against real Windows processes: this file runs under
 * Windows node.exe (under Wine in the Windows lane, `npm run test:windows`),
 * bundled by scripts/windows/bundle.ts, with node:test.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { LocalRuntime } from '../../service/src/index.ts';
import { Win32Inspector } from '../../service/src/provider/inspect/win32.ts';
import { loadKernel32 } from '../../service/src/provider/win32/kernel32.ts';

const children: ChildProcess[] = [];
after(() => {
  for (const child of children) if (child.exitCode === null) child.kill();
});

async function waitFor(what: string, predicate: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A Node.js child running `script`, its stdout collected. */
function node(script: string): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let text = '';
  child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { child, output: () => text };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (_error) {
    return false;
  }
}

/** A parent that starts a grandchild detached from it (a process group and console of its own), prints its pid, and waits. */
const DETACHING_PARENT =
  "const c = require('child_process').spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore', detached: true }); c.unref(); console.log(c.pid); setTimeout(() => {}, 60000)";

const OWNER = 'owner';
const inspector = new Win32Inspector();

if (process.argv[2] === OWNER) await runOwner();
else {
  describe('the Windows inspector, against real processes', () => {
    it('is on Windows (or Wine), with kernel32 bound', () => {
      assert.equal(process.platform, 'win32');
      const wine = loadKernel32().wineVersion();
      console.log(`# running under ${wine === undefined ? 'Windows' : `Wine ${wine}`}`);
    });

    it('shows a spawned tree with the right parents', async () => {
      const { child, output } = node(
        "const c = require('child_process').spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' }); console.log(c.pid); setTimeout(() => {}, 60000)",
      );
      await waitFor('the grandchild pid', () => /\d+\n/.test(output()));
      const grandchild = Number(output().trim());
      const rows = inspector.snapshot();
      const byPid = new Map(rows.map((row) => [row.identity.pid, row]));
      assert.equal(byPid.get(child.pid!)?.ppid, process.pid);
      assert.equal(byPid.get(grandchild)?.ppid, child.pid);
      assert.match(byPid.get(grandchild)!.name ?? '', /node\.exe$/i);
      assert.equal(byPid.get(process.pid)?.alive, true);
      child.kill();
      await once(child, 'exit');
      process.kill(grandchild);
      await waitFor('the grandchild gone', () => !alive(grandchild));
    });

    it('keeps identities stable, tells a new process apart, flips liveness on exit, and never adopts a fenced identity', async () => {
      const first = node('setTimeout(() => {}, 60000)');
      const second = node('setTimeout(() => {}, 60000)');
      await Promise.all([once(first.child, 'spawn'), once(second.child, 'spawn')]);
      const identity = inspector.identity(first.child.pid!)!;
      assert.ok(identity !== undefined);
      assert.deepEqual(inspector.identity(first.child.pid!), identity);
      const other = inspector.identity(second.child.pid!)!;
      assert.notEqual(`${other.pid}/${other.started}`, `${identity.pid}/${identity.started}`);
      assert.equal(inspector.isAlive(identity), true);
      first.child.kill();
      await once(first.child, 'exit');
      await waitFor('liveness to flip', () => !inspector.isAlive(identity));
      assert.equal(inspector.identity(first.child.pid!), undefined);
      // The same pid with another start time is another process: nothing may be done to it.
      const stranger = { pid: second.child.pid!, started: identity.started };
      assert.equal(inspector.isAlive(stranger), false);
      assert.equal(inspector.signalProcess(stranger, 'SIGKILL'), false);
      assert.equal(second.child.exitCode, null);
      assert.equal(inspector.signalProcess(other, 'SIGKILL'), true);
      const [code] = (await once(second.child, 'exit')) as [number | null];
      assert.equal(code, 1);
    });
  });

  describe('LocalRuntime on Windows, end to end', () => {
    const runtime = new LocalRuntime();
    after(() => runtime.dispose());

    it('contains sessions in Job Objects', () => {
      assert.equal(runtime.containmentMode, 'job');
      assert.equal(runtime.capabilities.platform, 'win32');
      assert.equal(runtime.capabilities.exactInputWait, false);
    });

    it('pipes, collects, reports exit codes and waits for the tree', async () => {
      const handle = runtime.spawn({
        argv: [process.execPath, '-e', "process.stdin.pipe(process.stdout); process.stdin.on('end', () => { console.error('err'); process.exitCode = 5 })"],
        cwd: process.cwd(),
        stdio: { stdin: 'pipe', stdout: { maxBytes: 1 << 16 }, stderr: { maxBytes: 1 << 16 } },
        graceMs: 2000,
      });
      handle.stdin!.end('hello\n');
      assert.deepEqual(await handle.done, { exitCode: 5, signal: null });
      assert.equal(handle.collected.stdout!.readFrom(0).text, 'hello\n');
      assert.match(handle.collected.stderr!.readFrom(0).text, /^err\r?\n$/);
      assert.equal(await handle.waitForExit(), true);
    });

    it('ends a tree with a detached grandchild whole on terminate', async () => {
      const handle = runtime.spawn({
        argv: [process.execPath, '-e', DETACHING_PARENT],
        cwd: process.cwd(),
        stdio: { stdin: 'ignore', stdout: { maxBytes: 1 << 16 }, stderr: { maxBytes: 1 << 16 } },
        graceMs: 2000,
      });
      await waitFor('the grandchild pid', () => /\d+\n/.test(handle.collected.stdout!.readFrom(0).text));
      const grandchild = Number(handle.collected.stdout!.readFrom(0).text.trim());
      assert.equal(alive(grandchild), true);
      handle.terminate();
      assert.deepEqual(await handle.done, { exitCode: 1, signal: null });
      assert.equal(await handle.waitForExit(), true);
      assert.equal(alive(grandchild), false);
    });

    it('ends every session of an owner that is killed', async () => {
      // The owner: this file run as a process with a LocalRuntime and one tree whose grandchild
      // detached. Killing the owner closes its jobs, and kill-on-close ends what was in them.
      const owner = spawn(process.execPath, [fileURLToPath(import.meta.url), OWNER], { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(owner);
      let text = '';
      owner.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
      await waitFor("the owner's tree", () => /^pids \d+ \d+$/m.test(text));
      const [root, grandchild] = /^pids (\d+) (\d+)$/m.exec(text)!.slice(1).map(Number) as [number, number];
      assert.equal(alive(root), true);
      assert.equal(alive(grandchild), true);
      owner.kill();
      await once(owner, 'exit');
      await waitFor('the tree to end with its owner', () => !alive(root) && !alive(grandchild));
    });
  });
}

/** The owner of the killed-owner test: a runtime with one tree, its pids printed, then nothing until killed. */
async function runOwner(): Promise<void> {
  const runtime = new LocalRuntime();
  const handle = runtime.spawn({
    argv: [process.execPath, '-e', DETACHING_PARENT],
    cwd: process.cwd(),
    stdio: { stdin: 'ignore', stdout: { maxBytes: 1 << 16 }, stderr: 'pipe' },
    graceMs: 2000,
  });
  await waitFor('the grandchild pid', () => /\d+\n/.test(handle.collected.stdout!.readFrom(0).text));
  console.log(`pids ${handle.pid} ${handle.collected.stdout!.readFrom(0).text.trim()}`);
  setInterval(() => {}, 60_000);
}
