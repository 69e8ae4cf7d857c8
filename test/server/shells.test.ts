/**
 * Shells the daemon runs itself (/v1/shells and the WebSocket calls): the
 * engine over the owner's own terminals, long requests, and what a client
 * that goes away, a busy shell and bad input get.
 */
import { dirname } from 'node:path';
import { schemas } from '@execworld/sdk/protocol';
import { describe, expect } from 'vitest';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { ALICE, ALICE_READER, BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';
import { PWSH } from '../conformance/shell-pwsh-contract.ts';

let daemon: TestDaemon;
let runtime: RemoteRuntime;

const test = daemonTest();

test.beforeAll(async ({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  runtime = await connect(daemon.url, { token: ALICE });
});
test.afterAll(async () => {
  await runtime?.dispose();
});

async function createShell(): Promise<string> {
  const created = await daemon.request('POST', '/v1/shells', { body: { cwd: '/tmp' } });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

describe('/v1/shells', () => {
  test('starts a shell on a terminal of the owner and runs commands in it, state kept', async () => {
    const id = await createShell();
    const info = (await daemon.request('GET', `/v1/shells/${id}`)).body;
    expect(info).toMatchObject({ id, dialect: 'bash', cwd: '/tmp', state: 'idle' });
    const terminals = (await daemon.request('GET', '/v1/terminals')).body.terminals as { id: string; status: string }[];
    expect(terminals.find((terminal) => terminal.id === info.terminalId)?.status).toBe('running');

    await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'cd / && export SEEN=yes' } });
    const run = await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'echo "$SEEN in $PWD"; exit_with() { return $1; }; exit_with 4' } });
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({
      output: 'yes in /\n',
      exitCode: 4,
      signal: null,
      reason: 'completed',
      truncated: false,
      waitingFor: null,
      terminalId: info.terminalId,
    });
    // The offsets name the bytes in the terminal's own stream.
    const raw = await daemon.request(
      'GET',
      `/v1/terminals/${info.terminalId}/output?from=${run.body.outputStart}&maxBytes=${run.body.outputEnd - run.body.outputStart}`,
    );
    expect(Buffer.from(raw.body.data as string, 'base64').toString()).toBe('yes in /\r\n');
    expect((await daemon.request('GET', '/v1/shells')).body.shells.map((shell: { id: string }) => shell.id)).toContain(id);
  });

  test('answers waiting_for_input, refuses a new command with 409 SHELL_BUSY, and takes the reply', async () => {
    const id = await createShell();
    const asked = await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'read -p "ok? " a; echo "got $a"' } });
    expect(asked.body).toMatchObject({ reason: 'waiting_for_input', output: 'ok? ' });
    expect((await daemon.request('GET', `/v1/shells/${id}`)).body.state).toBe('open');
    const busy = await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'echo typed-into-read' } });
    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe('SHELL_BUSY');
    expect((await daemon.request('POST', `/v1/shells/${id}/send`, { body: { input: 'yes\r' } })).body).toMatchObject({
      reason: 'completed',
      output: 'got yes\n',
      exitCode: 0,
    });
  });

  test('lists its last runs with their state and output for any reader of the owner, within its bounds', async () => {
    const id = await createShell();
    const history = async (token?: string): Promise<{ status: number; body: any }> =>
      daemon.request('GET', `/v1/shells/${id}/history`, token === undefined ? {} : { token });
    expect((await history()).body).toEqual({ runs: [], dropped: 0 });
    await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'read -p "ok? " a; echo "got $a"' } });
    expect((await history(ALICE_READER)).body.runs).toMatchObject([
      { command: 'read -p "ok? " a; echo "got $a"', state: 'waiting_for_input', exitCode: null, waitingFor: { command: 'bash' }, output: 'ok? ' },
    ]);
    // A run refused as busy is no run.
    expect((await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'echo typed-into-read' } })).status).toBe(409);
    await daemon.request('POST', `/v1/shells/${id}/send`, { body: { input: 'yes\r' } });
    const answered = (await history()).body;
    expect(answered.runs).toHaveLength(1);
    expect(answered.runs[0]).toMatchObject({ state: 'completed', exitCode: 0, waitingFor: null, output: 'ok? got yes\n', truncated: false });
    // Only the end of a long output is kept.
    const long = schemas.SHELL_RUN_OUTPUT_CHARS * 2;
    await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: `head -c ${long} /dev/zero | tr '\\0' x; echo; echo end-$((1+1))` } });
    const kept = (await history()).body.runs[1];
    expect(kept.output).toHaveLength(schemas.SHELL_RUN_OUTPUT_CHARS);
    expect(kept.output.endsWith('x\nend-2\n')).toBe(true);
    expect(kept.truncated).toBe(true);
    // A long command is kept by its start.
    const command = `: ${'c'.repeat(schemas.SHELL_RUN_COMMAND_CHARS)}`;
    await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command } });
    expect((await history()).body.runs[2].command).toBe(command.slice(0, schemas.SHELL_RUN_COMMAND_CHARS));
    // Only the last runs are kept, and the list says how many went.
    for (let n = 0; n < schemas.SHELL_RUNS_KEPT; n += 1) await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: `echo run-${n}` } });
    const last = (await history()).body;
    expect(last.runs).toHaveLength(schemas.SHELL_RUNS_KEPT);
    expect(last.dropped).toBe(3);
    expect(last.runs.at(-1)).toMatchObject({
      command: `echo run-${schemas.SHELL_RUNS_KEPT - 1}`,
      state: 'completed',
      output: `run-${schemas.SHELL_RUNS_KEPT - 1}\n`,
    });
    expect((await history(BOB)).status).toBe(404);
  });

  test('reports the shell’s exit and runs the next command on a fresh terminal', async () => {
    const id = await createShell();
    const before = (await daemon.request('GET', `/v1/shells/${id}`)).body.terminalId as string;
    expect((await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'exit 3' } })).body).toMatchObject({ reason: 'shell_exited', exitCode: 3 });
    const next = await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'echo again' } });
    expect(next.body).toMatchObject({ reason: 'completed', output: 'again\n' });
    expect(next.body.terminalId).not.toBe(before);
  });

  test('interrupts the command when the REST caller goes away, and the shell takes the next one', async () => {
    const id = await createShell();
    const controller = new AbortController();
    const request = fetch(`${daemon.url}/v1/shells/${id}/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'sleep 60' }),
      signal: controller.signal,
    }).catch(() => undefined);
    await waitFor('the run to be in progress', async () => (await daemon.request('GET', `/v1/shells/${id}`)).body.state === 'running');
    controller.abort();
    await request;
    await waitFor('the shell to be idle again', async () => (await daemon.request('GET', `/v1/shells/${id}`)).body.state === 'idle');
    expect((await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'echo next' } })).body).toMatchObject({
      reason: 'completed',
      output: 'next\n',
    });
  });

  test('interrupts a run another call waits for: both calls answer how it ended, and the shell stays', async () => {
    const id = await createShell();
    await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'export KEPT=yes' } });
    const running = daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'echo begun; sleep 100' } });
    await waitFor('the run to be in progress', async () => (await daemon.request('GET', `/v1/shells/${id}`)).body.state === 'running');
    const interrupted = await daemon.request('POST', `/v1/shells/${id}/interrupt`);
    expect(interrupted.status).toBe(200);
    expect(interrupted.body).toMatchObject({ reason: 'canceled', exitCode: 130, signal: 'SIGINT' });
    expect((await running).body).toEqual(interrupted.body);
    expect((await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'echo $KEPT' } })).body).toMatchObject({ output: 'yes\n', exitCode: 0 });
  });

  test('runs over the WebSocket with the SDK, and deletes the shell and forgets every terminal it ran on', async () => {
    const created = await runtime.call('shell.create', { cwd: '/tmp' });
    const result = await runtime.call('shell.run', { id: created.id, command: 'printf "%s" over-ws' });
    expect(result).toMatchObject({ output: 'over-ws', exitCode: 0, reason: 'completed' });
    // The shell exits and runs the next command on a new terminal: both are the shell's.
    await runtime.call('shell.run', { id: created.id, command: 'exit 4' });
    const second = (await runtime.call('shell.run', { id: created.id, command: 'echo again' })).terminalId!;
    expect(second).not.toBe(created.terminalId);
    const pids = await Promise.all([created.terminalId!, second].map(async (id) => (await daemon.request('GET', `/v1/terminals/${id}`)).body.pid as number));
    expect(await runtime.call('shell.delete', { id: created.id })).toEqual({ ok: true });
    expect((await daemon.request('GET', `/v1/shells/${created.id}`)).status).toBe(404);
    for (const id of [created.terminalId, second]) expect((await daemon.request('GET', `/v1/terminals/${id}`)).status, id!).toBe(404);
    expect((await daemon.request('GET', '/v1/terminals')).body.terminals.map((terminal: { id: string }) => terminal.id)).not.toContain(second);
    // Forgotten once ended: nothing of either still runs.
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  });

  test.skipIf(PWSH.skip)(`runs a pwsh shell found on the PATH of its environment${PWSH.note}`, { timeout: 120_000 }, async () => {
    const pwshProgram = PWSH.require();
    const created = await daemon.request('POST', '/v1/shells', {
      body: { cwd: '/tmp', dialect: 'pwsh', env: { PATH: `${dirname(pwshProgram)}:/usr/bin:/bin` } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.dialect).toBe('pwsh');
    const run = await daemon.request('POST', `/v1/shells/${created.body.id}/run`, { body: { command: 'Write-Output "hi from pwsh"; /bin/sh -c "exit 5"' } });
    expect(run.body).toMatchObject({ output: 'hi from pwsh\n', exitCode: 5, reason: 'completed' });
    expect((await daemon.request('DELETE', `/v1/shells/${created.body.id}`)).status).toBe(200);
  });

  test('refuses bad input with 400 and another owner’s shell with 404', async () => {
    const id = await createShell();
    const empty = await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: '' } });
    expect(empty.status).toBe(400);
    expect(empty.body.error.code).toBe('INVALID_ARGUMENT');
    const dialect = await daemon.request('POST', '/v1/shells', { body: { cwd: '/tmp', dialect: 'zsh' } });
    expect(dialect.status).toBe(400);
    expect(dialect.body.error.message).toMatch(/dialect/);
    const missingCwd = await daemon.request('POST', '/v1/shells', { body: { cwd: '/definitely/missing' } });
    expect(missingCwd.status).toBe(422);
    expect(missingCwd.body.error.code).toBe('CWD_NOT_FOUND');
    const foreign = await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'true' }, token: BOB });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('NOT_FOUND');
    const noRun = await daemon.request('POST', `/v1/shells/${id}/wait`, { body: {} });
    expect(noRun.status).toBe(400);
  });
});
