/**
 * MCP tasks over Streamable HTTP, with the official SDK's client against a
 * real daemon on 127.0.0.1: a long tool called with `task` is answered at
 * once with a task that runs on in the daemon (its board shared by the
 * per-request servers), polled, fetched, listed and cancelled; owners see
 * only their own; the bound and the TTL hold; a call without `task` is
 * answered as before.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema, McpError, type CallToolResult, type Task } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect } from 'vitest';
import { TASK_LIMITS } from '../../service/src/server/mcp/tasks.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { ALICE, ALICE_READER, BOB } from '../helpers/daemon.ts';
import { waitFor } from '../helpers/wait.ts';
import { McpTestClient } from './helpers.ts';

const CAROL = 'carol-token-0123456789abcdefg';
const test = daemonTest({}, { owners: [{ owner: 'carol', token: CAROL }] });

let alice: McpTestClient;
let reader: McpTestClient;
let bob: McpTestClient;

test.beforeAll(async ({ daemon }) => {
  alice = await McpTestClient.http(daemon.url, ALICE);
  reader = await McpTestClient.http(daemon.url, ALICE_READER);
  bob = await McpTestClient.http(daemon.url, BOB);
});
test.afterAll(async () => {
  await Promise.all([alice, reader, bob].map((client) => client?.close()));
});

/** Calls `name` as a task (`ttl` asked, or none) and answers the task the server created. */
async function startTask(client: Client, name: string, args: Record<string, unknown>, ttl?: number): Promise<Task> {
  const { task } = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: ttl === undefined ? {} : { ttl } } },
    CreateTaskResultSchema,
  );
  return task;
}

/** Polls tasks/get until the task is done, then answers its tasks/get and tasks/result. */
async function finish(client: Client, taskId: string): Promise<{ task: Task; result: CallToolResult }> {
  let task: Task | undefined;
  await waitFor(
    `task ${taskId} done`,
    async () => {
      task = await client.experimental.tasks.getTask(taskId);
      return task.status === 'completed' || task.status === 'failed' || task.status === 'cancelled';
    },
    60_000,
  );
  const result: CallToolResult = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
  return { task: task!, result };
}

/** The JSON-RPC error `promise` rejects with: its code and the catalog code of its data. */
async function refusal(promise: Promise<unknown>): Promise<{ code: number; catalog: string | undefined; message: string }> {
  const error = await promise.then(
    () => {
      throw new Error('expected a JSON-RPC error');
    },
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(McpError);
  const { code, data, message } = error as McpError;
  return { code, catalog: (data as { code?: string } | undefined)?.code, message };
}

/** A run's answer without what differs from one run to the next (its shell, its duration, its usage figures). */
function comparable(structured: any): Record<string, unknown> {
  // Two runs' usage is two measurements: they agree on what they say, not on the figures.
  const { durationMs: _durationMs, handle: _handle, usage, ...rest } = structured;
  return { ...rest, usage: usage === undefined ? undefined : Object.keys(usage).sort() };
}

const LONG_TOOLS = ['shell_run', 'shell_send', 'shell_wait'];

describe('MCP tasks', () => {
  test('advertises tasks as far as a token can use them, and marks the long tools as taking one', async () => {
    expect(alice.client.getServerCapabilities()?.tasks).toEqual({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const { tools } = await alice.client.listTools();
    for (const tool of tools) expect(tool.execution?.taskSupport, tool.name).toBe(LONG_TOOLS.includes(tool.name) ? 'optional' : undefined);
    // A read token's tools take no task; it lists its owner's tasks and cancels none.
    expect(reader.client.getServerCapabilities()?.tasks).toEqual({ list: {} });
    expect((await reader.client.listTools()).tools.filter((tool) => tool.execution !== undefined)).toEqual([]);
  });

  test('runs shell_run as a task, polled to the same answer as the plain call', async () => {
    const command = 'sleep 1; echo done; (exit 3)';
    const plain = await alice.client.callTool({ name: 'shell_run', arguments: { command } });
    expect(plain).not.toHaveProperty('task');
    expect(plain.structuredContent).toMatchObject({ status: 'exited', exitCode: 3, output: 'done\n' });

    const messages = [];
    const started = performance.now();
    let createdMs = 0;
    for await (const message of alice.client.experimental.tasks.callToolStream({ name: 'shell_run', arguments: { command } }, CallToolResultSchema, {
      task: {},
    })) {
      if (message.type === 'taskCreated') createdMs = performance.now() - started;
      messages.push(message);
    }
    // For the record: the task is answered at once, its answer after the command's second and the polls.
    console.log(`task created in ${createdMs.toFixed(1)} ms, answered in ${(performance.now() - started).toFixed(0)} ms, ${messages.length - 2} polls`);
    const created = messages[0]!;
    expect(created.type).toBe('taskCreated');
    if (created.type !== 'taskCreated') return;
    expect(created.task).toMatchObject({ status: 'working', ttl: TASK_LIMITS.defaultTtlMs, pollInterval: TASK_LIMITS.pollIntervalMs });
    const last = messages.at(-1)!;
    expect(last.type, JSON.stringify(last)).toBe('result');
    if (last.type !== 'result') return;
    const { result } = last;
    expect(result.isError).toBeFalsy();
    expect(comparable(result.structuredContent)).toEqual(comparable(plain.structuredContent));
    expect(result._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId: created.task.taskId });
    expect((await alice.client.experimental.tasks.getTask(created.task.taskId)).status).toBe('completed');
    for (const answer of [plain.structuredContent, result.structuredContent] as any[]) await alice.ok('session_end', { id: answer.handle.shell });
  });

  test('completes a task at a read -p prompt with waiting_for_input, and answers it with shell_send as a task', async () => {
    const asked = await finish(alice.client, (await startTask(alice.client, 'shell_run', { command: 'read -p "Name? " name; echo "hi $name"' })).taskId);
    expect(asked.task.status).toBe('completed');
    expect(asked.result.structuredContent).toMatchObject({ status: 'waiting_for_input', program: 'bash', prompt: 'Name? ', exitCode: null });
    const shell = (asked.result.structuredContent as any).handle.shell as string;
    const answered = await finish(alice.client, (await startTask(alice.client, 'shell_send', { shell, input: 'world\n' })).taskId);
    expect(answered.result.structuredContent).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((answered.result.structuredContent as any).output).toContain('hi world');
    await alice.ok('session_end', { id: shell });
  });

  test('fails a task whose tool refuses, its statusMessage and its result the tool error', async () => {
    const { task, result } = await finish(alice.client, (await startTask(alice.client, 'shell_wait', { shell: 's_gone0000000' })).taskId);
    expect(task.status).toBe('failed');
    expect(task.statusMessage).toMatch(/^NOT_FOUND: /);
    expect(result).toMatchObject({ isError: true, _meta: { 'execworld/error': { code: 'NOT_FOUND' } } });
  });

  test('cancels a running sleep: tasks/cancel interrupts its command and the task stays cancelled', async () => {
    const shell = (await alice.ok('shell_run', { command: 'true' })).handle.shell as string;
    const task = await startTask(alice.client, 'shell_run', { shell, command: 'echo sleeping; sleep 600', waitMs: 600_000 });
    await waitFor('the sleep to run', async () => (await alice.ok('session_list')).shells.find((entry: any) => entry.id === shell)?.state === 'running');
    const cancelled = await alice.client.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: 'cancelled' });
    // Its answer is the interrupted command's.
    const { task: after, result } = await finish(alice.client, task.taskId);
    expect(after.status).toBe('cancelled');
    expect(result.structuredContent).toMatchObject({ status: 'interrupted', exitCode: 130, signal: 'SIGINT' });
    expect((result.structuredContent as any).output).toContain('sleeping');
    // The shell is free again: the sleep is gone.
    expect(await alice.ok('shell_run', { shell, command: 'echo after' })).toMatchObject({ status: 'exited', output: 'after\n' });
    const again = await refusal(alice.client.experimental.tasks.cancelTask(task.taskId));
    expect(again.code).toBe(-32602);
    await alice.ok('session_end', { id: shell });
  });

  test("keeps an owner's tasks from another owner, and a read token from cancelling them", async () => {
    const shell = (await alice.ok('shell_run', { command: 'true' })).handle.shell as string;
    const task = await startTask(alice.client, 'shell_run', { shell, command: 'sleep 600', waitMs: 600_000 });
    expect((await refusal(bob.client.experimental.tasks.getTask(task.taskId))).code).toBe(-32602);
    expect((await refusal(bob.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema))).code).toBe(-32602);
    expect((await refusal(bob.client.experimental.tasks.cancelTask(task.taskId))).code).toBe(-32602);
    expect((await bob.client.experimental.tasks.listTasks()).tasks.map((entry) => entry.taskId)).not.toContain(task.taskId);
    // Alice's read token sees it (its answer is output the read tools read) but cannot cancel it.
    expect((await reader.client.experimental.tasks.listTasks()).tasks.map((entry) => entry.taskId)).toContain(task.taskId);
    expect((await reader.client.experimental.tasks.getTask(task.taskId)).status).toBe('working');
    const readOnly = await refusal(reader.client.experimental.tasks.cancelTask(task.taskId));
    expect(readOnly.catalog).toBe('READ_ONLY');
    expect((await alice.client.experimental.tasks.getTask(task.taskId)).status).toBe('working');
    // A read token's task-augmented call is a plain call, as of a server that takes no task: answered, or refused READ_ONLY.
    const listed = await reader.client.request({ method: 'tools/call', params: { name: 'session_list', arguments: {}, task: {} } }, CallToolResultSchema);
    expect(listed.isError).toBeFalsy();
    expect((listed.structuredContent as any).shells.map((entry: any) => entry.id)).toContain(shell);
    const refused = await reader.client.request(
      { method: 'tools/call', params: { name: 'shell_run', arguments: { command: 'true' }, task: {} } },
      CallToolResultSchema,
    );
    expect(refused).toMatchObject({ isError: true, _meta: { 'execworld/error': { code: 'READ_ONLY' } } });
    await alice.client.experimental.tasks.cancelTask(task.taskId);
    await alice.ok('session_end', { id: shell });
  });

  test('keeps a scoped token to the tasks of its scope: a port token reaches no MCP; a session token sees, fetches and cancels its own only, on a board of the minted tokens', async ({
    daemon,
  }) => {
    const mine = (await alice.ok('shell_run', { command: 'true' })).handle.shell as string;
    const other = (await alice.ok('shell_run', { command: 'true' })).handle.shell as string;
    const owners = await startTask(alice.client, 'shell_run', { shell: other, command: 'echo OWNER-PRIVATE-$((6*7)); sleep 600', waitMs: 600_000 });
    const mint = async (body: Record<string, unknown>): Promise<string> => {
      const minted = await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 600_000, ...body } });
      expect(minted.status).toBe(201);
      return minted.body.token as string;
    };
    // A port's token is for its port's preview or forward: /mcp is beyond it, tasks and all.
    const portToken = await mint({ port: 8080 });
    const portCall = await fetch(`${daemon.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${portToken}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/list', params: {} }),
    });
    expect(portCall.status).toBe(403);
    expect(((await portCall.json()) as { error: { code: string } }).error.code).toBe('TOKEN_SCOPE');

    const scoped = await McpTestClient.http(daemon.url, await mint({ session: mine }));
    try {
      // The owner's task is not the session token's: not listed, fetched or cancelled.
      expect((await scoped.client.experimental.tasks.listTasks()).tasks).toEqual([]);
      expect((await refusal(scoped.client.experimental.tasks.getTask(owners.taskId))).code).toBe(-32602);
      expect((await refusal(scoped.client.experimental.tasks.getTaskResult(owners.taskId, CallToolResultSchema))).code).toBe(-32602);
      expect((await refusal(scoped.client.experimental.tasks.cancelTask(owners.taskId))).code).toBe(-32602);
      expect((await alice.client.experimental.tasks.getTask(owners.taskId)).status).toBe('working');
      // Its own task, in its session, is its own; the owner sees every task of its tokens.
      const own = await startTask(scoped.client, 'shell_run', { shell: mine, command: 'echo in-scope' });
      expect((await finish(scoped.client, own.taskId)).result.structuredContent).toMatchObject({ output: 'in-scope\n' });
      expect((await scoped.client.experimental.tasks.listTasks()).tasks.map((entry) => entry.taskId)).toEqual([own.taskId]);
      expect((await alice.client.experimental.tasks.listTasks()).tasks.map((entry) => entry.taskId)).toEqual(
        expect.arrayContaining([owners.taskId, own.taskId]),
      );
      // The minted tokens' tasks fill a board of their own: the owner's tokens still start theirs.
      await Promise.all(Array.from({ length: TASK_LIMITS.perOwner - 1 }, () => startTask(scoped.client, 'shell_wait', { shell: 's_gone0000000' })));
      expect(await refusal(startTask(scoped.client, 'shell_wait', { shell: mine }))).toMatchObject({ code: -32600, catalog: 'LIMIT_EXCEEDED' });
      const alices = await startTask(alice.client, 'shell_wait', { shell: 's_gone0000000' });
      expect((await finish(alice.client, alices.taskId)).task.status).toBe('failed');
    } finally {
      await scoped.close();
      await alice.client.experimental.tasks.cancelTask(owners.taskId);
      await alice.ok('session_end', { id: mine });
      await alice.ok('session_end', { id: other });
    }
  });

  test('refuses a task of a tool that takes none with the spec’s -32601', async () => {
    const notTask = await refusal(startTask(alice.client, 'file_list', { path: '/' }));
    expect(notTask).toMatchObject({ code: -32601, catalog: 'INVALID_ARGUMENT' });
    const unknown = await refusal(startTask(alice.client, 'no_such_tool', {}));
    expect(unknown).toMatchObject({ code: -32601, catalog: 'NOT_FOUND' });
  });

  test('holds an owner to its bound of tasks: past it a task is refused LIMIT_EXCEEDED, and others are not held by it', async ({ daemon }) => {
    const carol = await McpTestClient.http(daemon.url, CAROL);
    try {
      const held = await Promise.all(Array.from({ length: TASK_LIMITS.perOwner }, () => startTask(carol.client, 'shell_wait', { shell: 's_gone0000000' })));
      expect(new Set(held.map((task) => task.taskId)).size).toBe(TASK_LIMITS.perOwner);
      const past = await refusal(startTask(carol.client, 'shell_wait', { shell: 's_gone0000000' }));
      expect(past).toMatchObject({ code: -32600, catalog: 'LIMIT_EXCEEDED' });
      expect((await carol.client.experimental.tasks.listTasks()).tasks).toHaveLength(TASK_LIMITS.perOwner);
      // The bound is the owner's: alice still starts one.
      const alices = await startTask(alice.client, 'shell_wait', { shell: 's_gone0000000' });
      expect((await finish(alice.client, alices.taskId)).task.status).toBe('failed');
      // A call without a task is not held by it.
      expect(await carol.call('shell_wait', { shell: 's_gone0000000' })).toMatchObject({ isError: true, code: 'NOT_FOUND' });
    } finally {
      await carol.close();
    }
  });

  test('keeps an answer larger than its bound as LIMIT_EXCEEDED, with its first line: its status and handle', async () => {
    // About 1.6 MB of output, held whole (maxOutputBytes), is more than 2 MiB of JSON: the output is in the text and the structured content.
    const args = { command: 'yes 123456789 | head -c 1500000', maxOutputBytes: 2_000_000 };
    const { task, result } = await finish(alice.client, (await startTask(alice.client, 'shell_run', args)).taskId);
    expect(task.status).toBe('failed');
    expect(task.statusMessage).toMatch(/^LIMIT_EXCEEDED: the answer is \d+ bytes, more than an MCP task keeps \(2097152\)/);
    expect(result).toMatchObject({ isError: true, _meta: { 'execworld/error': { code: 'LIMIT_EXCEEDED' } } });
    const text = (result.content[0] as { text: string }).text;
    expect(text.length).toBeLessThan(2000);
    const shell = /It began: exited: code 0 \[shell (s_[\w-]+), terminal t_[\w-]+, offset \d+\]/.exec(text)?.[1];
    expect(shell, text).toBeDefined();
    await alice.ok('session_end', { id: shell });
  });

  test('drops a task when its ttl passes, interrupting the command it still runs', async () => {
    const shell = (await alice.ok('shell_run', { command: 'true' })).handle.shell as string;
    const task = await startTask(alice.client, 'shell_run', { shell, command: 'sleep 600', waitMs: 600_000 }, 1);
    expect(task.ttl).toBe(TASK_LIMITS.minTtlMs);
    await waitFor('the task dropped', async () => {
      try {
        await alice.client.experimental.tasks.getTask(task.taskId);
        return false;
      } catch (error) {
        return error instanceof McpError && error.code === -32602;
      }
    });
    expect((await alice.client.experimental.tasks.listTasks()).tasks.map((entry) => entry.taskId)).not.toContain(task.taskId);
    await waitFor('the shell free again', async () => (await alice.call('shell_run', { shell, command: 'echo after' })).structured?.output === 'after\n');
    await alice.ok('session_end', { id: shell });
  });

  test('drops its tasks when the daemon shuts down, interrupting their commands before it ends the sessions', async ({ startDaemon }) => {
    const own = await startDaemon();
    const client = await McpTestClient.http(own.url, ALICE);
    const dir = mkdtempSync(join(tmpdir(), 'execworld-mcp-tasks-'));
    const marker = join(dir, 'interrupted');
    const armed = join(dir, 'armed');
    try {
      const shell = (await client.ok('shell_run', { command: 'true' })).handle.shell as string;
      // The shell's trap runs only on the interrupt (SIGINT), not when the session is ended.
      await startTask(client.client, 'shell_run', {
        shell,
        command: `trap 'echo yes > ${marker}; exit 130' INT; : > ${armed}; sleep 600 & wait`,
        waitMs: 600_000,
      });
      await waitFor('the sleep to run', async () => (await client.ok('session_list')).shells.find((entry: any) => entry.id === shell)?.state === 'running');
      // The trap is set once the shell ran the line: an interrupt before that discards the line, as bash does.
      await waitFor('the trap to be set', () => existsSync(armed));
      await own.close();
      expect(readFileSync(marker, 'utf8')).toBe('yes\n');
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
