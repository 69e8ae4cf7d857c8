/**
 * A new build that passes its rehearsal and then fails after the exec, before
 * it serves, gives every session back to the build it came from, which execs
 * again in the same process and serves on: the same pids, every stream
 * byte-exact, a shell's command answered with its exact status, input
 * applied once. Two faults, each a build of this checkout with one fault put
 * in (an entry file the test writes): one throws while it adopts the
 * sessions (nothing of them was read yet: the state goes back as it came),
 * one dies of an uncaught exception while it listens (it adopted and read
 * them: it hands over what it holds, as in a takeover). The requester is
 * told why; health and metrics say the last takeover was rolled back; a good
 * build takes over afterwards as ever.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { callDaemon, type DaemonProcess } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { control, endKeptPrograms, keepPrograms, outputOf, requestTakeover, zombies } from '../helpers/takeover.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonProcessTest();

const ENTRY_MODULE = new URL('../../service/bin/entry.js', import.meta.url).href;
const REGISTRY_MODULE = new URL('../../service/src/server/sessions/registry.ts', import.meta.url).href;

/** What each broken build does after the exec (and only then: its rehearsal and its request pass). */
const FAULTS = {
  adopt: {
    message: 'a fault of this build after it adopted the sessions',
    source: (message: string) => `
  const { SessionRegistry } = await import(${JSON.stringify(REGISTRY_MODULE)});
  const adopt = SessionRegistry.prototype.adoptSessions;
  SessionRegistry.prototype.adoptSessions = function (...args) {
    adopt.apply(this, args);
    throw new Error(${JSON.stringify(message)});
  };`,
  },
  listen: {
    message: 'an uncaught fault of this build while it listened',
    source: (message: string) => `
  const net = await import('node:net');
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (...args) {
    if (args[0] !== null && typeof args[0] === 'object' && args[0].fd !== undefined) {
      setImmediate(() => {
        throw new Error(${JSON.stringify(message)});
      });
      return this;
    }
    return listen.apply(this, args);
  };`,
  },
} as const;

/** The entry of a build of this checkout with `fault` put in, written to `directory`. */
function brokenBuild(directory: string, fault: keyof typeof FAULTS): string {
  const path = join(directory, `broken-${fault}.mjs`);
  writeFileSync(
    path,
    `import process from 'node:process';
import { load } from ${JSON.stringify(ENTRY_MODULE)};
const { main } = await load('cli');
if (process.argv.includes('--takeover-state')) {${FAULTS[fault].source(FAULTS[fault].message)}
}
await main(process.argv.slice(2));
`,
  );
  return path;
}

async function metric(daemon: DaemonProcess, name: string): Promise<number> {
  const text = await (await fetch(`${daemon.url}/metrics`, { headers: { authorization: `Bearer ${daemon.token}` } })).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
}

/** Each round starts a build twice or three times (its rehearsal, its exec, the previous build's exec back): seconds each on a busy host. */
describe('a new build that fails after the exec', { timeout: 180_000 }, () => {
  test('gives every session back to the previous build, which serves on with nothing lost', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-give-back-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const kept = await keepPrograms(daemon, stateDir, { terminal: 3, printer: 4 });
    const { printer, reader } = kept;
    const shell = await callDaemon(daemon, 'POST', '/v1/shells', { dialect: 'bash', cwd: stateDir });
    await waitFor('output to flow', async () => (await callDaemon(daemon, 'GET', `/v1/processes/${printer.id}`)).stdout.end > 100);
    const first = (await control(stateDir, { op: 'status' }))[0]!;
    let expected = '';
    for (const [round, fault] of (['adopt', 'listen'] as const).entries()) {
      const line = `line-${round}\n`;
      expect(await callDaemon(daemon, 'POST', `/v1/processes/${reader.id}/stdin`, { data: line, writer: 'w', seq: round + 1 })).toMatchObject({
        applied: true,
      });
      expected += line;
      const go = join(stateDir, `go-${fault}`);
      const pending = callDaemon(daemon, 'POST', `/v1/shells/${shell.id}/run`, {
        command: `echo started-${fault}; while [ ! -e ${go} ]; do sleep 0.05; done; (exit ${round + 20})`,
      }).catch(() => undefined);
      await waitFor('the command to run', async () => (await outputOf(daemon, shell.terminalId)).text.includes(`started-${fault}\r\n`));
      const before = (await control(stateDir, { op: 'status' }))[0]!;

      const outcome = await requestTakeover(stateDir, brokenBuild(stateDir, fault));
      expect(outcome.stdout).toContain('the new build passed its rehearsal');
      expect(outcome.stderr).toContain(
        `did not take over: this build failed after the exec (${FAULTS[fault].message}); the previous build took its 4 sessions back`,
      );
      expect(outcome.status).toBe(1);

      // The same process, the previous build again: a new image, no takeover counted, the rollback told.
      const after = (await control(stateDir, { op: 'status' }))[0]!;
      expect(after.pid).toBe(daemon.pid);
      expect(after.imageStartedAt).not.toBe(before.imageStartedAt);
      expect(after.takeovers).toBe(0);
      expect(after.lastTakeover).toMatchObject({ sessions: 4, rolledBack: { reason: FAULTS[fault].message } });
      expect((await callDaemon(daemon, 'GET', '/v1/health')).daemon).toMatchObject({
        startedAt: new Date(first.startedAt as number).toISOString(),
        takeovers: 0,
        lastTakeover: { sessions: 4, rolledBack: { reason: FAULTS[fault].message } },
      });
      expect(await metric(daemon, 'execworld_last_takeover_rolled_back')).toBe(1);
      expect(await metric(daemon, 'execworld_takeovers_total')).toBe(0);

      // The shell's command, in the middle when the build failed, ends with its exact status.
      await pending;
      writeFileSync(go, '');
      expect(await callDaemon(daemon, 'POST', `/v1/shells/${shell.id}/wait`, { timeoutMs: 20_000 })).toMatchObject({
        reason: 'completed',
        exitCode: round + 20,
      });
      await waitFor("the failed build's helpers to be collected", () => zombies(daemon).length === 0);
    }

    // A good build takes over as ever.
    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
    const status = (await control(stateDir, { op: 'status' }))[0]!;
    expect(status.takeovers).toBe(1);
    expect(status.lastTakeover).not.toHaveProperty('rolledBack');
    expect(await metric(daemon, 'execworld_last_takeover_rolled_back')).toBe(0);

    // Nothing lost: the same pids, every stream whole and in order, each line of input read once, the exact exit codes.
    await endKeptPrograms(daemon, kept, expected);
    await callDaemon(daemon, 'DELETE', `/v1/shells/${shell.id}`);
  });

  test('a token file the new build could not take fails the rehearsal, before any exec: the daemon serves on', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-give-back-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const tokenFile = (
      JSON.parse(
        daemon
          .log()
          .split('\n')
          .find((line) => line.includes('"tokenFile"'))!,
      ) as { tokenFile: string }
    ).tokenFile;
    const tokens = readFileSync(tokenFile, 'utf8');
    const before = (await control(stateDir, { op: 'status' }))[0]!;
    writeFileSync(tokenFile, '{ not a token file');
    try {
      const outcome = await requestTakeover(stateDir);
      expect(outcome.status).toBe(1);
      expect(outcome.stderr).toMatch(/did not take over: the new build failed its rehearsal: it exited with status \d+: .*token/);
    } finally {
      writeFileSync(tokenFile, tokens);
    }
    // The same image serves on, with the tokens it read at its start.
    expect((await control(stateDir, { op: 'status' }))[0]!.imageStartedAt).toBe(before.imageStartedAt);
    expect((await callDaemon(daemon, 'GET', '/v1/health')).daemon).toMatchObject({ takeovers: 0 });
  });
});
