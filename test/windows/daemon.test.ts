/**
 * The daemon on Windows node.exe under Wine, driven from Linux through the
 * SDK: the process part of the conformance suite, the platform facts of
 * /v1/health, and sessions ended with a daemon that is killed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type RemoteProcess, type RemoteRuntime } from '@execworld/sdk';
import { defineProcessContract, type ProcessWorld } from '../conformance/process-contract.ts';
import { waitFor } from '../helpers/wait.ts';
import { startWineDaemon, WINDOWS_NODE, type WineDaemon } from './wine.ts';

/** Windows under Wine, as a daemon there sees it. */
const WINE_WORLD: ProcessWorld = {
  node: WINDOWS_NODE,
  cwd: 'C:\\windows',
  missing: 'C:\\definitely\\missing',
  onPath: { name: 'cmd', resolved: /\\cmd\.exe$/i },
  signals: 'win32',
  pidAtSpawn: 'after-start',
  spawnFailure: 'catalog',
  spillReadable: false,
};

defineProcessContract(
  'RemoteRuntime over a daemon on Windows node.exe under Wine',
  async () => {
    const daemon = await startWineDaemon();
    const runtime = await connect(daemon.url, { token: daemon.token });
    return {
      runtime,
      started: async (handle) => (await (handle as RemoteProcess).started.catch(() => ({ pid: -1 }))).pid,
      close: async () => {
        await runtime.dispose();
        await daemon.kill();
      },
    };
  },
  WINE_WORLD,
);

describe('a daemon on Windows node.exe under Wine', () => {
  let daemon: WineDaemon;
  let runtime: RemoteRuntime;
  beforeAll(async () => {
    daemon = await startWineDaemon();
    runtime = await connect(daemon.url, { token: daemon.token });
  });
  afterAll(async () => {
    await runtime.dispose();
    await daemon.kill();
  });

  /** Whether Windows process `pid` runs, asked of the world with a Node.js probe. */
  async function alive(pid: number): Promise<boolean> {
    const probe = runtime.spawn({
      argv: [WINDOWS_NODE, '-e', `try { process.kill(${pid}, 0); console.log('alive') } catch { console.log('gone') }`],
      cwd: 'C:\\windows',
      stdio: { stdin: 'ignore', stdout: { maxBytes: 100 }, stderr: { maxBytes: 1000 } },
      graceMs: 1000,
    });
    await probe.done;
    return probe.collected.stdout!.readFrom(0).text.trim() === 'alive';
  }

  it('reports the platform and what is exact there', async () => {
    const health = await runtime.call('health.get', {});
    expect(health).toMatchObject({
      platform: 'win32',
      arch: 'x64',
      capabilities: { processes: true, terminals: true, exactInputWait: false, containment: 'job', signals: false, defaultShell: 'pwsh' },
    });
    expect(daemon.log()).toContain('"containment":"job"');
  });

  it('says which limits Wine lets a job keep, refuses a limit it does not, and reports usage from the job', async () => {
    const health = await runtime.call('health.get', {});
    // Wine stores no job limit (every one reads back 0) and refuses a CPU rate (docs/platforms.md).
    expect(health.capabilities.limits).toEqual({
      supported: [],
      unsupported: [
        {
          name: 'memoryBytes',
          reason: expect.stringMatching(/^the job does not keep its JobMemoryLimit: QueryInformationJobObject read it back as 0 .*\(Wine /),
        },
        { name: 'pids', reason: expect.stringMatching(/^the job does not keep its ActiveProcessLimit: QueryInformationJobObject read it back as 0 .*\(Wine /) },
        { name: 'cpu', reason: expect.stringMatching(/^SetInformationJobObject\(JobObjectCpuRateControlInformation\) failed with error 87 \(Wine /) },
      ],
    });
    const run = async (body: object): Promise<{ status: number; body: any }> => {
      const answer = await fetch(`${daemon.url}/v1/run`, {
        method: 'POST',
        headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ cwd: 'C:\\windows', ...body }),
      });
      return { status: answer.status, body: await answer.json() };
    };
    const refused = await run({ argv: [WINDOWS_NODE, '-e', '0'], limits: { pids: 8 } });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^limits\.pids: this host cannot enforce it: /) });
    const busy = await run({ argv: [WINDOWS_NODE, '-e', 'const end = Date.now() + 500; while (Date.now() < end);'] });
    console.log(`a 0.5 s busy loop under Wine: usage ${JSON.stringify(busy.body.usage)}`);
    expect(busy.status).toBe(200);
    // Wine's job accounting counts processes but keeps no times and no peak: zeros, where Windows has the job's own.
    expect(busy.body).toMatchObject({
      exitCode: 0,
      usage: { cpuUserMs: expect.any(Number), cpuSystemMs: expect.any(Number), peakMemoryBytes: expect.any(Number), limitHit: null, oomKilled: false },
    });
  });

  it('takes its sessions with it when it is killed, a detached grandchild included', async () => {
    const victim = await startWineDaemon();
    const client = await connect(victim.url, { token: victim.token });
    const tree = client.spawn({
      argv: [
        WINDOWS_NODE,
        '-e',
        "const c = require('child_process').spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], { stdio: 'ignore', detached: true }); c.unref(); console.log(c.pid); setTimeout(() => {}, 120000)",
      ],
      cwd: 'C:\\windows',
      stdio: { stdin: 'ignore', stdout: { maxBytes: 1000 }, stderr: { maxBytes: 1000 } },
      graceMs: 1000,
    });
    const { pid: root } = await tree.started;
    await waitFor('the grandchild pid', () => /\d+\n/.test(tree.collected.stdout!.readFrom(0).text), 60_000);
    const grandchild = Number(tree.collected.stdout!.readFrom(0).text.trim());
    expect(await alive(root)).toBe(true);
    expect(await alive(grandchild)).toBe(true);
    await victim.kill();
    // Its sessions are gone with it: there is nothing left to dispose of.
    client.close();
    await waitFor('the sessions of the killed daemon to end', async () => !(await alive(root)) && !(await alive(grandchild)), 60_000);
  });
});
