/**
 * The dependency rules of the layout are lint rules: these cases prove each
 * one refuses a violating import and lets the allowed ones through, with the
 * repository's own ESLint configuration.
 */
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: process.cwd() });

/** The messages of no-restricted-imports for `code` linted as if it were the file at `filePath`. */
async function restrictions(code: string, filePath: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).filter((message) => message.ruleId === 'no-restricted-imports').map((message) => message.message);
}

describe('layout rules', { timeout: 60_000 }, () => {
  it('server/ imports the provider only through provider/api.ts', async () => {
    const concrete = "import { LocalRuntime } from '../provider/local-runtime.ts';\nexport const runtime = LocalRuntime;\n";
    expect(await restrictions(concrete, 'service/src/server/handlers.ts')).toEqual([expect.stringContaining('provider/api.ts')]);
    const nested = "import type { ManagedProcess } from '../../provider/process.ts';\nexport type Held = ManagedProcess;\n";
    expect(await restrictions(nested, 'service/src/server/sessions/registry.ts')).toEqual([expect.stringContaining('provider/api.ts')]);
    const api = "import type { ExecutionProvider } from '../provider/api.ts';\nexport type Provider = ExecutionProvider;\n";
    expect(await restrictions(api, 'service/src/server/handlers.ts')).toEqual([]);
    // The composition root builds the concrete provider.
    expect(await restrictions(concrete, 'service/src/server/daemon-runtime.ts')).toEqual([]);
  });

  it('sdk/src/protocol imports nothing of Node or of a socket library', async () => {
    const node = "import { readFileSync } from 'node:fs';\nexport const read = readFileSync;\n";
    expect(await restrictions(node, 'sdk/src/protocol/frames.ts')).toHaveLength(1);
    const socket = "import type { WebSocket } from 'ws';\nexport type Socket = WebSocket;\n";
    expect(await restrictions(socket, 'sdk/src/protocol/frames.ts')).toHaveLength(1);
    expect(await restrictions(node, 'sdk/src/remote/reach.ts')).toEqual([]);
  });

  it('sdk/src/client imports nothing of Node or of a socket library: a browser page runs it', async () => {
    const node = "import { setTimeout } from 'node:timers/promises';\nexport const wait = setTimeout;\n";
    expect(await restrictions(node, 'sdk/src/client/protocol-client.ts')).toHaveLength(1);
    const socket = "import { WebSocket } from 'ws';\nexport const Socket = WebSocket;\n";
    expect(await restrictions(socket, 'sdk/src/client/browser.ts')).toHaveLength(1);
    const remote = "import { dialChannel } from '../remote/ws-channel.ts';\nexport const dial = dialChannel;\n";
    expect(await restrictions(remote, 'sdk/src/client/redial.ts')).toHaveLength(1);
    expect(await restrictions(socket, 'sdk/src/remote/ws-channel.ts')).toEqual([]);
  });

  it('the browser view imports the SDK only through its package exports, and nothing of Node', async () => {
    const relative = "import { decodeDataFrame } from '../../../sdk/src/protocol/codec.ts';\nexport const decode = decodeDataFrame;\n";
    expect(await restrictions(relative, 'service/ui/page/link.ts')).toEqual([expect.stringContaining('@execworld/sdk/client')]);
    const node = "import { Buffer } from 'node:buffer';\nexport const bytes = Buffer;\n";
    expect(await restrictions(node, 'service/ui/page/views.ts')).toHaveLength(1);
    const socket = "import { WebSocket } from 'ws';\nexport const Socket = WebSocket;\n";
    expect(await restrictions(socket, 'service/ui/page/link.ts')).toHaveLength(1);
    // The SDK's main entry is its Node runtime; the page takes the client's entry.
    const main = "import { connect } from '@execworld/sdk';\nexport const open = connect;\n";
    expect(await restrictions(main, 'service/ui/page/main.ts')).toHaveLength(1);
    const exported = "import { ProtocolClient } from '@execworld/sdk/client';\nexport const Client = ProtocolClient;\n";
    expect(await restrictions(exported, 'service/ui/page/link.ts')).toEqual([]);
    // And the page as it is.
    const results = await eslint.lintFiles(['service/ui/page/*.ts']);
    const found = results.flatMap((result) =>
      result.messages.filter((message) => message.ruleId === 'no-restricted-imports').map((message) => `${result.filePath}: ${message.message}`),
    );
    expect(results.length).toBeGreaterThanOrEqual(3);
    expect(found).toEqual([]);
  });

  it('sdk/ never imports the service or node-pty', async () => {
    const service = "import { LocalRuntime } from '../../../service/src/provider/local-runtime.ts';\nexport const runtime = LocalRuntime;\n";
    expect(await restrictions(service, 'sdk/src/remote/runtime.ts')).toHaveLength(1);
    const pty = "import { spawn } from 'node-pty';\nexport const start = spawn;\n";
    expect(await restrictions(pty, 'sdk/src/remote/runtime.ts')).toHaveLength(1);
  });
});
