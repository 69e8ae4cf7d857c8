/**
 * The daemon's MCP server at /mcp, driven by the official SDK's client over
 * Streamable HTTP against a real daemon on 127.0.0.1: the tools, an agent's
 * loop over real programs (read -p, less, sleep, a file edited behind its
 * back), read-only tokens, Origin, and bad calls.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { ALICE, ALICE_READER, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';
import { PWSH } from '../conformance/shell-pwsh-contract.ts';
import { McpTestClient } from './helpers.ts';

const READ_TOOLS = ['output_read', 'terminal_screen', 'file_read', 'file_list', 'session_list'];
const WRITE_TOOLS = [
  'shell_run',
  'shell_send',
  'shell_wait',
  'shell_interrupt',
  'terminal_open',
  'terminal_type',
  'terminal_resize',
  'file_write',
  'file_edit',
  'session_end',
];

const test = daemonTest();
let daemon: TestDaemon;
let mcp: McpTestClient;
let dir: string;

test.beforeAll(async ({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  mcp = await McpTestClient.http(daemon.url, ALICE);
  dir = mkdtempSync(join(tmpdir(), 'execworld-mcp-'));
});
afterAll(async () => {
  await mcp.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('MCP over Streamable HTTP', () => {
  test('lists every tool, each with an input and an output schema', async () => {
    const { tools } = await mcp.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([...READ_TOOLS, ...WRITE_TOOLS].sort());
    for (const tool of tools) {
      expect(tool.inputSchema.type, tool.name).toBe('object');
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      expect(tool.description, tool.name).toBeTruthy();
    }
    expect(mcp.client.getServerVersion()?.name).toBe('execworld');
  });

  test('takes the token in X-Execworld-Token too, and refuses a missing or wrong one', async () => {
    const other = await McpTestClient.http(daemon.url, ALICE, 'x-execworld-token');
    expect(await other.tools()).toContain('shell_run');
    await other.close();
    await expect(McpTestClient.http(daemon.url, 'not-a-token-of-anyone-here')).rejects.toThrow(/401|UNAUTHORIZED/);
  });

  test('shows a read-only token only the read tools, and refuses it a write tool with READ_ONLY', async () => {
    const reader = await McpTestClient.http(daemon.url, ALICE_READER);
    try {
      expect((await reader.tools()).sort()).toEqual([...READ_TOOLS].sort());
      const refused = await reader.call('shell_run', { command: 'touch /tmp/never' });
      expect(refused).toMatchObject({ isError: true, code: 'READ_ONLY' });
      expect((await daemon.request('GET', '/v1/shells')).body.shells).toEqual([]);
      expect((await reader.call('file_write', { path: join(dir, 'never'), content: 'x' })).code).toBe('READ_ONLY');
      // It reads what its owner made.
      expect((await reader.ok('session_list')).shells).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  test('refuses a browser origin that is not allowed, as the WebSocket does, and admits the daemon its own', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const foreign = await fetch(`${daemon.url}/mcp`, { method: 'POST', headers: { ...headers, origin: 'http://evil.example' }, body });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as any).error.code).toBe('FORBIDDEN_ORIGIN');
    const own = await fetch(`${daemon.url}/mcp`, { method: 'POST', headers: { ...headers, origin: daemon.url }, body });
    expect(own.status).toBe(200);
    expect(((await own.json()) as any).result.tools.length).toBe(READ_TOOLS.length + WRITE_TOOLS.length);
  });

  test('answers an unknown tool, bad arguments and a stale handle with tool errors carrying catalog codes', async () => {
    expect(await mcp.call('no_such_tool')).toMatchObject({ isError: true, code: 'NOT_FOUND' });
    expect(await mcp.call('shell_run', { command: 5 })).toMatchObject({ isError: true, code: 'INVALID_ARGUMENT' });
    expect(await mcp.call('shell_run', { command: 'true', surprise: 1 })).toMatchObject({ isError: true, code: 'INVALID_ARGUMENT' });
    // The shells those two calls started for their command are gone with their refusal.
    expect((await daemon.request('GET', '/v1/shells')).body.shells).toEqual([]);
    expect(await mcp.call('shell_send', { shell: 's_gone0000000', input: 'x\n' })).toMatchObject({ isError: true, code: 'NOT_FOUND' });
    expect(await mcp.call('output_read', { terminal: 't_gone0000000' })).toMatchObject({ isError: true, code: 'NOT_FOUND' });
    expect(await mcp.call('session_end', { id: 'x' })).toMatchObject({ isError: true, code: 'NOT_FOUND' });
    expect(await mcp.call('file_read', { path: join(dir, 'absent') })).toMatchObject({ isError: true, code: 'FS_NOT_FOUND' });
    // The server still answers.
    expect(await mcp.tools()).toContain('session_list');
  });

  test("counts its calls in the daemon's metrics as the mcp transport", async () => {
    await mcp.ok('session_list');
    const metrics = await daemon.request('GET', '/metrics');
    expect(metrics.body).toMatch(/execworld_\w+_count\{[^}]*operation="shell\.list"[^}]*transport="mcp"[^}]*outcome="ok"/);
  });
});

describe('a scripted agent loop', () => {
  let shell: string;

  test('runs a command and answers its exact exit code, with a handle', async () => {
    const answer = await mcp.ok('shell_run', { command: `cd ${dir} && echo started; (exit 7)` });
    expect(answer).toMatchObject({ status: 'exited', exitCode: 7, signal: null, truncatedBytes: 0 });
    expect(answer.output).toBe('started\n');
    expect(answer.handle.shell).toMatch(/^s_/);
    expect(answer.handle.terminal).toMatch(/^t_/);
    shell = answer.handle.shell;
    // The shell persists: its directory is still the one cd chose.
    expect((await mcp.ok('shell_run', { shell, command: 'pwd' })).output).toBe(`${dir}\n`);
  });

  test('answers a read -p prompt: waiting_for_input naming the program and the prompt, then the reply', async () => {
    const asked = await mcp.ok('shell_run', { shell, command: 'read -p "Your name? " name; echo "hello $name"' });
    expect(asked).toMatchObject({ status: 'waiting_for_input', program: 'bash', prompt: 'Your name? ', exitCode: null });
    const answered = await mcp.ok('shell_send', { shell, input: 'world\n' });
    expect(answered).toMatchObject({ status: 'exited', exitCode: 0 });
    expect(answered.output).toContain('hello world');
  });

  test('quits less, which it finds waiting for a key', async () => {
    const paged = await mcp.ok('shell_run', { shell, command: 'seq 1 1000 | less' });
    expect(paged).toMatchObject({ status: 'waiting_for_input', program: 'less' });
    expect(await mcp.ok('shell_send', { shell, input: 'q' })).toMatchObject({ status: 'exited', exitCode: 0 });
  });

  test('answers running at its wait limit, reads the output from the handle, and interrupts a sleep', async () => {
    const started = await mcp.ok('shell_run', { shell, command: 'echo before-sleep; sleep 600', waitMs: 300 });
    expect(started).toMatchObject({ status: 'running', reason: 'wait_limit', exitCode: null });
    // The output so far is readable from the terminal's stream, from an offset.
    const read = await mcp.ok('output_read', { terminal: started.handle.terminal, from: 0 });
    expect(read.text).toContain('before-sleep');
    expect(read.next).toBeGreaterThanOrEqual(started.handle.offset);
    const still = await mcp.ok('shell_wait', { shell, waitMs: 200 });
    expect(still).toMatchObject({ status: 'running' });
    const stopped = await mcp.ok('shell_interrupt', { shell });
    expect(stopped).toMatchObject({ status: 'interrupted', exitCode: 130, signal: 'SIGINT' });
    expect((await mcp.ok('shell_run', { shell, command: 'echo after' })).output).toBe('after\n');
  });

  test('answers timed_out when timeoutMs passes, the command interrupted', async () => {
    expect(await mcp.ok('shell_run', { shell, command: 'sleep 600', timeoutMs: 300 })).toMatchObject({ status: 'timed_out', exitCode: 130 });
  });

  test('keeps the head and tail of a large output and counts the bytes cut', async () => {
    const answer = await mcp.ok('shell_run', { shell, command: 'seq 1 100000', maxOutputBytes: 2000 });
    expect(answer.status).toBe('exited');
    expect(answer.output.startsWith('1\n2\n3\n')).toBe(true);
    expect(answer.output.trimEnd().endsWith('99999\n100000')).toBe(true);
    // seq prints 588895 bytes; at most 2000 were kept (the terminal adds a CR a line).
    expect(answer.truncatedBytes).toBeGreaterThan(588_895 - 2000);
  });

  test('edits a file, is refused with a stale version, reads it again and retries', async () => {
    const path = join(dir, 'notes.txt');
    const written = await mcp.ok('file_write', { path, content: 'alpha\nbeta\n' });
    expect(written.operation).toBe('create');
    const read = await mcp.ok('file_read', { path });
    expect(read).toMatchObject({ text: 'alpha\nbeta\n', version: written.version });
    // Someone else changes it meanwhile.
    expect(await mcp.ok('shell_run', { shell, command: `echo gamma >> ${path}` })).toMatchObject({ exitCode: 0 });
    const stale = await mcp.call('file_edit', { path, oldString: 'beta', newString: 'BETA', version: read.version });
    expect(stale).toMatchObject({ isError: true, code: 'FS_STALE_VERSION' });
    const fresh = await mcp.ok('file_read', { path });
    expect(fresh.text).toBe('alpha\nbeta\ngamma\n');
    const edited = await mcp.ok('file_edit', { path, oldString: 'beta', newString: 'BETA', version: fresh.version });
    expect(edited.version).not.toBe(fresh.version);
    expect((await mcp.ok('file_read', { path })).text).toBe('alpha\nBETA\ngamma\n');
    expect((await mcp.call('file_write', { path, content: 'x', version: fresh.version })).code).toBe('FS_STALE_VERSION');
    expect((await mcp.call('file_write', { path, content: 'x', createOnly: true })).code).toBe('FS_NOT_OBSERVED');
    const listing = await mcp.ok('file_list', { path: dir });
    expect(listing.entries).toEqual([expect.objectContaining({ name: 'notes.txt', type: 'file' })]);
  });

  test('drives a terminal: open, type, read the screen, resize, end', async () => {
    const opened = await mcp.ok('terminal_open', { argv: ['cat'], rows: 10, cols: 40 });
    expect(opened).toMatchObject({ status: 'running', rows: 10, cols: 40 });
    const terminal = opened.terminal as string;
    await mcp.ok('terminal_type', { terminal, data: 'typed-line\r' });
    await waitFor(
      'the typed line on the screen',
      async () => (await mcp.ok('terminal_screen', { terminal })).lines.filter((line: string) => line === 'typed-line').length === 2,
    );
    expect(await mcp.ok('terminal_resize', { terminal, rows: 30, cols: 100 })).toMatchObject({ rows: 30, cols: 100 });
    expect((await mcp.ok('terminal_screen', { terminal })).rows).toBe(30);
    const sessions = await mcp.ok('session_list');
    expect(sessions.terminals.map((entry: { id: string }) => entry.id)).toContain(terminal);
    expect(sessions.shells.map((entry: { id: string }) => entry.id)).toContain(shell);
    await mcp.ok('session_end', { id: terminal });
    await mcp.ok('session_end', { id: shell });
    const after = await mcp.ok('session_list');
    expect(after.shells).toEqual([]);
    expect(after.terminals.map((entry: { id: string }) => entry.id)).not.toContain(terminal);
    expect(await mcp.call('shell_run', { shell, command: 'true' })).toMatchObject({ isError: true, code: 'NOT_FOUND' });
  });
});

describe('limits and usage', () => {
  test('shell_run and terminal_open take limits; the answers carry usage and the limits a session runs under', async ({ startDaemon }) => {
    const limited = await startDaemon({ containment: 'cgroup' });
    const client = await McpTestClient.http(limited.url, ALICE);
    try {
      const pidsMax = 'cat /sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)/pids.max';
      const run = await client.ok('shell_run', { command: pidsMax, limits: { pids: 48 } });
      expect(run).toMatchObject({ status: 'exited', exitCode: 0, output: '48\n', usage: { limitHit: null, oomKilled: false } });
      const shellLimited = await client.ok('shell_run', { command: `python3 -c "x = b'x' * (600 << 20)"`, limits: { memoryBytes: 100 << 20 } });
      console.log('MCP shell_run usage of a memory hog', JSON.stringify(shellLimited.usage));
      expect(shellLimited).toMatchObject({ status: 'exited', exitCode: 137, usage: { limitHit: 'memory', oomKilled: true } });
      const terminal = await client.ok('terminal_open', { argv: ['sleep', '30'], limits: { cpu: 0.5, pids: 8 } });
      expect(terminal).toMatchObject({ status: 'running', limits: { cpu: 0.5, pids: 8 }, usage: { oomKilled: false } });
      // A bad limit is a tool error naming it.
      expect(await client.call('terminal_open', { argv: ['true'], limits: { pids: 0 } })).toMatchObject({ isError: true, code: 'INVALID_ARGUMENT' });
      await client.ok('session_end', { id: terminal.terminal });
    } finally {
      await client.close();
    }
  });

  test("session_list shows each session's limits and its usage so far, as execworld ps does", { timeout: 120_000 }, async ({ startDaemon }) => {
    const limited = await startDaemon({ containment: 'cgroup' });
    const client = await McpTestClient.http(limited.url, ALICE);
    try {
      const hash = 'head -c 100000000 /dev/zero | sha256sum';
      const { handle } = await client.ok('shell_run', { command: hash, limits: { pids: 40 } });
      const terminal = await client.ok('terminal_open', { argv: ['sh', '-c', `${hash}; exec sleep 60`], limits: { memoryBytes: 64 << 20 } });
      const spawned = (await limited.request('POST', '/v1/processes', { body: { argv: ['sh', '-c', `${hash}; exec sleep 60`], limits: { cpu: 0.5 } } })).body;
      const used = (entry: { usage?: { cpuUserMs: number; cpuSystemMs: number } } | undefined): number =>
        (entry?.usage?.cpuUserMs ?? 0) + (entry?.usage?.cpuSystemMs ?? 0);
      // Each hashes 100 MB: the list reads the cpu it used so far while it runs.
      let listed: Awaited<ReturnType<typeof client.call>> | undefined;
      await waitFor(
        'the terminal and the process to have hashed',
        async () => {
          const answer = await client.call('session_list');
          type Entry = { id: string; usage?: { cpuUserMs: number; cpuSystemMs: number } };
          const { terminals, processes } = answer.structured as { terminals: Entry[]; processes: Entry[] };
          listed = answer;
          return used(terminals.find((entry) => entry.id === terminal.terminal)) > 0 && used(processes.find((entry) => entry.id === spawned.id)) > 0;
        },
        60_000,
      );
      console.log('MCP session_list text', JSON.stringify(listed!.text));
      const { shells, terminals, processes } = listed!.structured;
      const usage = { cpuUserMs: expect.any(Number), cpuSystemMs: expect.any(Number), peakMemoryBytes: expect.any(Number), limitHit: null, oomKilled: false };
      expect(shells).toEqual([expect.objectContaining({ id: handle.shell, limits: { pids: 40 }, usage })]);
      expect(used(shells[0])).toBeGreaterThan(0);
      // A session that asks no pids limit runs under the default one (4096) where the host enforces pids.
      expect(terminals).toContainEqual(
        expect.objectContaining({ id: terminal.terminal, status: 'running', limits: { memoryBytes: 64 << 20, pids: 4096 }, usage }),
      );
      expect(processes).toContainEqual(expect.objectContaining({ id: spawned.id, status: 'running', limits: { pids: 4096, cpu: 0.5 } }));
      expect(listed!.text).toContain('limits {"pids":40}');
      expect(listed!.text).toContain(`limits {"memoryBytes":${64 << 20},"pids":4096}`);
      expect(listed!.text).toContain('limits {"pids":4096,"cpu":0.5}');
      expect(listed!.text).toMatch(/\[cpu \d+ ms user \+ \d+ ms system, peak memory \d+ bytes\]/);
      for (const id of [handle.shell, terminal.terminal, spawned.id]) await client.ok('session_end', { id });
    } finally {
      await client.close();
    }
  });
});

describe('a PowerShell shell', () => {
  test.skipIf(PWSH.skip)(`runs pwsh where it is found, with the same answers${PWSH.note}`, { timeout: 120_000 }, async () => {
    const pwsh = PWSH.require();
    const env = { PATH: `${dirname(pwsh)}:/usr/bin:/bin` };
    const answer = await mcp.ok('shell_run', { dialect: 'pwsh', env, command: 'Write-Output "from pwsh"; exit 9' });
    expect(answer).toMatchObject({ status: 'exited', exitCode: 9 });
    expect(answer.output).toContain('from pwsh');
    await mcp.ok('session_end', { id: answer.handle.shell });
  });
});
