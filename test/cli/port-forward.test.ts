/**
 * `execworld port-forward [LOCAL:]REMOTE ...` against a daemon: curl reaches
 * a server in the world through it, several ports at once, a refused port is
 * said on stderr, and a signal ends it.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect } from 'vitest';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { ALICE } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { cliEnv, runCli, startCli } from '../helpers/cli.ts';
import { waitFor } from '../helpers/wait.ts';
import { freePort, startWorldServer } from '../fixtures/world-server.ts';
import { parsePortSpec } from '../../service/src/cli/port-forward.ts';

const test = daemonTest();
const runtimes: RemoteRuntime[] = [];
afterAll(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.dispose();
});

const curl = async (url: string): Promise<{ code: number; stdout: string }> => {
  try {
    const { stdout } = await promisify(execFile)('curl', ['-sS', '--max-time', '30', url]);
    return { code: 0, stdout };
  } catch (error) {
    return { code: (error as { code: number }).code, stdout: '' };
  }
};

describe('execworld port-forward', () => {
  test('forwards local ports to ports in the world: curl gets the page, a refused port is said, a signal ends it', async ({ daemon }) => {
    const runtime = await connect(daemon.url, { token: ALICE });
    runtimes.push(runtime);
    const port = await startWorldServer(runtime);
    const closed = await freePort();
    const cli = startCli(['port-forward', `:${port}`, `0:${closed}`], { env: cliEnv(daemon.url, ALICE) });
    await waitFor(
      'both forwards listening',
      () =>
        cli
          .stdout()
          .split('\n')
          .filter((line) => line.startsWith('Forwarding from')).length === 2,
      30_000,
    );
    const [first, second] = [...cli.stdout().matchAll(/^Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)$/gm)].map((match) => [Number(match[1]), Number(match[2])]);
    expect(first![1]).toBe(port);
    expect(second![1]).toBe(closed);
    const page = await curl(`http://127.0.0.1:${first![0]}/hello`);
    expect(page).toEqual({ code: 0, stdout: 'hello from the world\n' });
    // curl: (52) empty reply or (56) recv failure, as the forward resets the connection.
    const refused = await curl(`http://127.0.0.1:${second![0]}/hello`);
    expect(refused.code).not.toBe(0);
    await waitFor('the refusal said', () => cli.stderr().includes('PORT_REFUSED'));
    expect(cli.stderr()).toContain(`-> ${closed}: PORT_REFUSED`);
    cli.child.kill('SIGINT');
    expect((await cli.result).code).toBe(0);
  }, 60_000);

  test('refuses a port out of range as a usage error', async ({ daemon }) => {
    const result = await runCli(['port-forward', '8080:70000'], { env: cliEnv(daemon.url, ALICE) });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('8080:70000 is not [LOCAL:]REMOTE');
  });
});

describe('parsePortSpec', () => {
  test.each([
    ['8080', { local: 8080, remote: 8080 }],
    [':8080', { local: 0, remote: 8080 }],
    ['0:8080', { local: 0, remote: 8080 }],
    ['9000:8080', { local: 9000, remote: 8080 }],
  ])('reads %s', (spec, expected) => expect(parsePortSpec(spec)).toEqual(expected));
  test.each(['0', 'x', '1:2:3', '65536', '-1:80', ''])('refuses %s', (spec) => expect(() => parsePortSpec(spec)).toThrow(/is not \[LOCAL:\]REMOTE/));
});
