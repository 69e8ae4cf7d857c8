/**
 * `execworld run` and `execworld screen` against a daemon, as a person uses them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE, startDaemon, type TestDaemon } from '../helpers/daemon.ts';
import { cliEnv, runCli } from '../helpers/cli.ts';
import { waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  daemon = await startDaemon();
  env = cliEnv(daemon.url, ALICE);
});
afterAll(() => daemon.close());

describe('execworld run', () => {
  it('prints the output and exits with the status, ending its shell', async () => {
    const result = await runCli(['run', '--cwd', '/tmp', 'echo "in $PWD"; exit_with() { return $1; }; exit_with 3'], { env });
    expect(result).toMatchObject({ code: 3, stdout: 'in /tmp\n', stderr: '' });
    expect((await daemon.request('GET', '/v1/shells')).body.shells).toEqual([]);
  });

  it('keeps a shell with --keep and runs in it with --shell', async () => {
    const first = await runCli(['run', '--keep', '--env', 'GREETING=hello', 'cd / && export KEPT=yes'], { env, cwd: '/tmp' });
    expect(first.code).toBe(0);
    const id = /shell (s_\S+)/.exec(first.stderr)?.[1];
    expect(id, first.stderr).toBeDefined();
    const second = await runCli(['run', '--shell', id!, 'echo "$KEPT $GREETING $PWD"'], { env });
    expect(second).toMatchObject({ code: 0, stdout: 'yes hello /\n' });
    expect((await daemon.request('DELETE', `/v1/shells/${id}`)).status).toBe(200);
  });

  it('says when the command waits for input, and keeps the shell for it', async () => {
    const result = await runCli(['run', 'printf "name? "; read answer'], { env });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('name? ');
    expect(result.stderr).toMatch(/^execworld: WAITING_FOR_INPUT: the command waits for input \(bash\); shell s_\S+ keeps it\n$/);
    const id = /shell (s_\S+)/.exec(result.stderr)![1]!;
    expect((await daemon.request('POST', `/v1/shells/${id}/send`, { body: { input: 'x\r' } })).body).toMatchObject({ reason: 'completed', exitCode: 0 });
    await daemon.request('DELETE', `/v1/shells/${id}`);
  });

  it('interrupts at --timeout and exits 130', async () => {
    const result = await runCli(['run', '--timeout', '300', 'echo begun; sleep 30'], { env });
    expect(result).toMatchObject({ code: 130, stdout: 'begun\n' });
    expect(result.stderr).toContain('TIMEOUT');
  });

  it('refuses bad usage with status 2 and an unknown shell with 1', async () => {
    expect((await runCli(['run'], { env })).code).toBe(2);
    expect((await runCli(['run', '--timeout', 'soon', 'true'], { env })).code).toBe(2);
    expect((await runCli(['run', '--shell', 's_x', '--pwsh', 'true'], { env })).code).toBe(2);
    const unknown = await runCli(['run', '--shell', 's_unknown', 'true'], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^execworld: NOT_FOUND: /);
  });
});

describe('execworld screen', () => {
  it('prints what the terminal shows', async () => {
    const created = await daemon.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/sh', '-c', 'printf "top line\\n  indented\\n"; sleep 30'], cwd: '/tmp', rows: 10, cols: 40, graceMs: 500 },
    });
    const id = created.body.id as string;
    await waitFor('the output', async () => (await daemon.request('GET', `/v1/terminals/${id}`)).body.output.end >= 20);
    const result = await runCli(['screen', id], { env });
    expect(result).toMatchObject({ code: 0, stdout: 'top line\n  indented\n' });
    const json = JSON.parse((await runCli(['screen', '--json', id], { env })).stdout) as { cursor: { row: number } };
    expect(json.cursor.row).toBe(2);
    await daemon.request('DELETE', `/v1/terminals/${id}`);
  });
});
