/**
 * Input idempotency is per writer: a client that attaches to a terminal after
 * another one wrote to it has its own sequence numbers, so none of its writes
 * is mistaken for a retry and dropped.
 */
import { describe, expect } from 'vitest';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { ALICE } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { collect, waitFor } from '../helpers/wait.ts';

const test = daemonTest();

let first: RemoteRuntime;
let second: RemoteRuntime;
test.beforeAll(async ({ daemon }) => {
  first = await connect(daemon.url, { token: ALICE });
  second = await connect(daemon.url, { token: ALICE });
});
test.afterAll(async () => {
  await first.dispose();
  await second.dispose();
});

describe('two clients writing to one terminal', () => {
  test('applies every write of the client that attached later', async () => {
    const terminal = await first.spawnTerminal({ argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
    const output = collect(terminal.output);
    for (let index = 1; index <= 5; index += 1) await terminal.write(`first-${index}\n`);
    const attached = await second.attachTerminal(terminal.id);
    for (let index = 1; index <= 5; index += 1) await attached.write(`second-${index}\n`);
    await waitFor("the later client's last line echoed", () => output.text().includes('second-5'));
    for (let index = 1; index <= 5; index += 1) expect(output.text()).toContain(`second-${index}\r\n`);
    await terminal.terminate();
  });
});
