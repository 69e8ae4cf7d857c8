/**
 * The MCP Inspector's CLI mode (@modelcontextprotocol/inspector-cli, the
 * Inspector's command-line client; the Inspector itself needs Node 22)
 * against the daemon's /mcp: it lists the tools and calls one.
 */
import { execFile } from 'node:child_process';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { describe, expect } from 'vitest';
import { ALICE, ALICE_READER, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

const INSPECTOR = createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector-cli/build/index.js');

const test = daemonTest();
let daemon: TestDaemon;

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

async function inspector(token: string, ...args: string[]): Promise<any> {
  // The CLI finds its own package.json by a path relative to the working directory: run it from beside it.
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [INSPECTOR, `${daemon.url}/mcp`, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, ...args],
    { cwd: dirname(INSPECTOR), timeout: 60_000 },
  );
  return JSON.parse(stdout);
}

describe('the MCP Inspector CLI', () => {
  test('lists the tools, a read-only token only the read tools', async () => {
    const all = (await inspector(ALICE, '--method', 'tools/list')).tools.map((tool: { name: string }) => tool.name);
    expect(all).toContain('shell_run');
    const read = (await inspector(ALICE_READER, '--method', 'tools/list')).tools.map((tool: { name: string }) => tool.name);
    expect(read).toContain('file_read');
    expect(read).not.toContain('shell_run');
  });

  test('runs a command and gets its exit code in the structured result', async () => {
    const result = await inspector(ALICE, '--method', 'tools/call', '--tool-name', 'shell_run', '--tool-arg', 'command=echo from-inspector; (exit 5)');
    expect(result.structuredContent).toMatchObject({ status: 'exited', exitCode: 5, output: 'from-inspector\n' });
    expect(result.content[0].text).toMatch(/^exited: code 5 /);
    expect((await daemon.request('DELETE', `/v1/shells/${result.structuredContent.handle.shell}`)).status).toBe(200);
  });
});
