/**
 * `execworld mcp`, the stdio bridge, as an MCP client launches it: the
 * official SDK's stdio client spawns the bin, which finds the daemon and its
 * token as the other commands do (EXECWORLD_URL, the token file).
 */
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect } from 'vitest';
import { ALICE, ALICE_READER, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { BIN, cliEnv, runCli } from '../helpers/cli.ts';
import { McpTestClient } from './helpers.ts';

const test = daemonTest();
let daemon: TestDaemon;

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

/** The bridge as a client launches it, its stderr kept for the failure messages. */
function bridge(env: NodeJS.ProcessEnv): { transport: StdioClientTransport; stderr: () => string } {
  const transport = new StdioClientTransport({ command: BIN, args: ['mcp'], env: env as Record<string, string>, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return { transport, stderr: () => stderr };
}

describe('execworld mcp', () => {
  test('bridges stdio to the daemon: the tools, a prompt answered, an exit code', async () => {
    const { transport, stderr } = bridge(cliEnv(daemon.url, ALICE));
    const mcp = await McpTestClient.connect(transport);
    try {
      expect(await mcp.tools(), stderr()).toContain('shell_run');
      const asked = await mcp.ok('shell_run', { command: 'read -p "continue? " yes; exit 4' });
      expect(asked).toMatchObject({ status: 'waiting_for_input', program: 'bash', prompt: 'continue? ' });
      const ended = await mcp.ok('shell_send', { shell: asked.handle.shell, input: 'y\n' });
      // exit ends the shell itself: its status is the command's.
      expect(ended).toMatchObject({ status: 'exited', exitCode: 4, shellExited: true });
      await mcp.ok('session_end', { id: asked.handle.shell });
      expect(await mcp.call('shell_wait', { shell: asked.handle.shell })).toMatchObject({ isError: true, code: 'NOT_FOUND' });
    } finally {
      await mcp.close();
    }
  });

  test("carries a read-only token's view", async () => {
    const { transport } = bridge(cliEnv(daemon.url, ALICE_READER));
    const mcp = await McpTestClient.connect(transport);
    try {
      expect(await mcp.tools()).not.toContain('shell_run');
      expect((await mcp.call('shell_run', { command: 'true' })).code).toBe('READ_ONLY');
    } finally {
      await mcp.close();
    }
  });

  test('answers a call the daemon refused as an error of that call, not a hang, and says why on stderr', async () => {
    const { transport, stderr } = bridge(cliEnv(daemon.url, 'a-token-nobody-has-0123456789'));
    await expect(McpTestClient.connect(transport)).rejects.toThrow(/401|UNAUTHORIZED/);
    expect(stderr()).toMatch(/UNAUTHORIZED|401/);
    await transport.close();
  });

  test('exits 0 when its stdin ends', async () => {
    expect(await runCli(['mcp'], { env: cliEnv(daemon.url, ALICE), stdin: '' })).toMatchObject({ code: 0, stdout: '' });
  });
});
