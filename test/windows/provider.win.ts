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
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type Koffi from 'koffi';
import { LocalRuntime } from '../../service/src/index.ts';
import type { SessionLimits } from '../../service/src/provider/containment/containment.ts';
import { JobObjectContainment } from '../../service/src/provider/containment/job-object.ts';
import { Win32Inspector } from '../../service/src/provider/inspect/win32.ts';
import {
  JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
  JOB_OBJECT_LIMIT_JOB_MEMORY,
  JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
  JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT,
  loadKernel32,
  PROCESS_QUERY_INFORMATION,
  PROCESS_SET_QUOTA,
  PROCESS_TERMINATE,
  type Handle,
  type JobCpuRate,
  type JobLimits,
  type Kernel32,
} from '../../service/src/provider/win32/kernel32.ts';
import { WindowsProcesses } from '../../service/src/provider/win32/processes.ts';

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

const MiB = 1024 * 1024;

/** A job made with the real calls, `limits` set, `pid` assigned: how Wine treats a limit, apart from the daemon. */
function jobOf(kernel32: Kernel32, limits: Omit<JobLimits, 'peakJobMemoryUsed'>, pid: number): Handle {
  const job = kernel32.CreateJobObject();
  assert.equal(kernel32.setJobLimits(job, limits), true);
  const handle = kernel32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE | PROCESS_QUERY_INFORMATION, pid);
  assert.equal(kernel32.AssignProcessToJobObject(job, handle), true);
  kernel32.CloseHandle(handle);
  return job;
}

if (process.argv[2] === OWNER) await runOwner();
else {
  describe('Job Object limits, against the real calls', () => {
    const kernel32 = loadKernel32();
    const wine = kernel32.wineVersion();

    it("finds which limits this host's jobs keep, and refuses the others", () => {
      const containment = new JobObjectContainment(kernel32, new WindowsProcesses(kernel32));
      const support = containment.limitSupport();
      console.log(`# limits: ${JSON.stringify(support)}`);
      if (wine === undefined) {
        assert.deepEqual(support, { supported: ['memoryBytes', 'pids', 'cpu'], unsupported: [] });
        return;
      }
      // Wine 8: SetInformationJobObject takes the extended limits and keeps only kill-on-close (its query
      // answers every field 0), and refuses a CPU rate with ERROR_INVALID_PARAMETER.
      assert.deepEqual(support, {
        supported: [],
        unsupported: [
          {
            name: 'memoryBytes',
            reason: `the job does not keep its JobMemoryLimit: QueryInformationJobObject read it back as 0 where it was set to 67108864 (Wine ${wine})`,
          },
          {
            name: 'pids',
            reason: `the job does not keep its ActiveProcessLimit: QueryInformationJobObject read it back as 0 where it was set to 64 (Wine ${wine})`,
          },
          { name: 'cpu', reason: `SetInformationJobObject(JobObjectCpuRateControlInformation) failed with error 87 (Wine ${wine})` },
        ],
      });
      assert.throws(() => containment.create('s-1', { pids: 8 }), { code: 'INVALID_ARGUMENT', message: /^limits\.pids: this host cannot enforce it: / });
    });

    it('holds a job to its ActiveProcessLimit and JobMemoryLimit where the host keeps them (Wine: neither)', async () => {
      const enforced = wine === undefined;
      // A parent that starts four children at once under a limit of 3 processes (itself and two).
      const parent = node(
        "const kids = []; setTimeout(() => { for (let i = 0; i < 4; i++) { try { const c = require('child_process').spawn(process.execPath, ['-e', 'setTimeout(() => {}, 3000)'], { stdio: 'ignore' }); c.on('spawn', () => console.log('started')); c.on('error', () => console.log('refused')); kids.push(c) } catch { console.log('refused') } } setTimeout(() => process.exit(0), 3500) }, 1000)",
      );
      await once(parent.child, 'spawn');
      const processJob = jobOf(
        kernel32,
        { limitFlags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_ACTIVE_PROCESS, activeProcessLimit: 3, jobMemoryLimit: 0n },
        parent.child.pid!,
      );
      await once(parent.child, 'exit');
      const started = parent.output().match(/started/g)?.length ?? 0;
      console.log(`# ActiveProcessLimit 3: ${started} of 4 children started`);
      assert.equal(started, enforced ? 2 : 4);
      kernel32.CloseHandle(processJob);
      // 256 MiB allocated under a job limit of 64 MiB.
      const hog = node(
        "setTimeout(() => { const kept = []; for (let i = 0; i < 16; i++) kept.push(Buffer.alloc(16 << 20, 1)); console.log('allocated') }, 1000)",
      );
      await once(hog.child, 'spawn');
      const memoryJob = jobOf(
        kernel32,
        { limitFlags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_JOB_MEMORY, activeProcessLimit: 0, jobMemoryLimit: BigInt(64 * MiB) },
        hog.child.pid!,
      );
      const [code] = (await once(hog.child, 'exit')) as [number | null];
      console.log(
        `# JobMemoryLimit 64 MiB, 256 MiB allocated: exit code ${code}, ${hog.output().includes('allocated') ? 'all allocated' : 'allocation refused'}`,
      );
      assert.equal(hog.output().includes('allocated'), !enforced);
      kernel32.CloseHandle(memoryJob);
    });

    it("gives a limited session's job its limits before its process is in it, and reads usage and limitHit from the job and its port", async () => {
      // Wine keeps no limit and refuses a CPU rate: this is the real kernel32 but for keeping what was set and
      // answering it back, as Windows does, so the daemon's path runs on Wine's jobs, processes and completion port.
      const calls: string[] = [];
      const kept = new Map<Handle, { limits?: Omit<JobLimits, 'peakJobMemoryUsed'>; cpu?: JobCpuRate }>();
      let port: { port: Handle; key: number } | undefined;
      const keeping: Kernel32 = {
        ...kernel32,
        setJobLimits(job, limits) {
          calls.push('limits');
          kept.set(job, { ...kept.get(job), limits });
          return kernel32.setJobLimits(job, limits);
        },
        jobLimits(job) {
          const read = kernel32.jobLimits(job);
          const limits = kept.get(job)?.limits;
          return read === undefined || limits === undefined ? read : { ...read, ...limits };
        },
        setJobCpuRate(job, rate) {
          calls.push('cpu');
          kept.set(job, { ...kept.get(job), cpu: rate });
          return true;
        },
        jobCpuRate: (job) => kept.get(job)?.cpu,
        associateCompletionPort(job, completionPort, key) {
          port = { port: completionPort, key };
          return kernel32.associateCompletionPort(job, completionPort, key);
        },
        AssignProcessToJobObject(job, handle) {
          calls.push('assign');
          return kernel32.AssignProcessToJobObject(job, handle);
        },
      };
      const containment = new JobObjectContainment(keeping, new WindowsProcesses(keeping), { processors: 2 });
      // What limits add to making a session's job: the extended limits, the rate and the port, side by side.
      const cost = (limits?: SessionLimits): number => {
        const started = performance.now();
        for (let index = 0; index < 200; index += 1) containment.create(`cost-${index}`, limits)!.remove();
        return ((performance.now() - started) * 1000) / 200;
      };
      const [plain, limited] = [cost(), cost({ memoryBytes: 256 * MiB, pids: 16, cpu: 0.5 })];
      console.log(`# a job made and closed: ${plain.toFixed(0)} µs without limits, ${limited.toFixed(0)} µs with all three`);
      const runtime = new LocalRuntime({ containment });
      try {
        const handle = runtime.spawn(
          {
            argv: [
              process.execPath,
              '-e',
              "const end = Date.now() + 300; while (Date.now() < end); console.log('ready'); process.stdin.resume(); process.stdin.on('end', () => {})",
            ],
            cwd: process.cwd(),
            stdio: { stdin: 'pipe', stdout: { maxBytes: 1 << 16 }, stderr: { maxBytes: 1 << 16 } },
            graceMs: 2000,
          },
          { limits: { memoryBytes: 256 * MiB, pids: 16, cpu: 0.5 } },
        );
        const limited = [...kept.values()].at(-1)!;
        assert.deepEqual(limited, {
          limits: {
            limitFlags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_ACTIVE_PROCESS | JOB_OBJECT_LIMIT_JOB_MEMORY,
            activeProcessLimit: 16,
            jobMemoryLimit: BigInt(256 * MiB),
          },
          cpu: { controlFlags: 5, cpuRate: 2500 },
        });
        // The probe's scratch job first, then the session's: limits and rate set, then the process assigned.
        assert.deepEqual(calls.slice(-3), ['limits', 'cpu', 'assign']);
        await waitFor('the program to start', () => handle.collected.stdout!.readFrom(0).text.includes('ready'));
        assert.equal(handle.usage?.()?.limitHit, null);
        // What Windows queues when a process creation passes the limit, which Wine never does.
        const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
        const post = koffi.load('kernel32.dll').func('bool PostQueuedCompletionStatus(void *port, uint32 bytes, uintptr key, uintptr overlapped)');
        assert.equal(post(port!.port, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT, port!.key, 0), true);
        handle.stdin!.end();
        assert.deepEqual(await handle.done, { exitCode: 0, signal: null });
        const usage = handle.usage?.();
        console.log(`# usage of a 0.3 s busy loop: ${JSON.stringify(usage)}`);
        assert.equal(usage?.limitHit, 'pids');
        assert.equal(usage?.oomKilled, false);
        assert.equal(typeof usage?.cpuUserMs, 'number');
      } finally {
        await runtime.dispose();
      }
    });
  });

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
