/**
 * The catalog's description of LIMIT_EXCEEDED names every bound the daemon
 * and the SDK raise it for: each place that raises it is listed here with the
 * words of the description that name its bound, so a bound added without
 * its words in the catalog (and so in docs/errors.md) fails here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOG } from '@execworld/sdk/protocol';

/** Per file, in the order of its places that raise LIMIT_EXCEEDED, the words of the description that name each one's bound. */
const BOUNDS: Record<string, readonly string[]> = {
  'sdk/src/client/protocol-client.ts': ['calls waiting for an answer', 'subscriptions open'],
  'service/src/provider/input-backlog.ts': ['Input waiting for a program that does not read'],
  'service/src/provider/local-runtime.ts': ['the pids all its sessions hold together'],
  'service/src/server/byte-budget.ts': ['each owner held to at most half of each', 'the budget of answers being read and sent'],
  'service/src/server/forwards.ts': ['port forwards open'],
  'service/src/server/handlers.ts': ['minted tokens that are good'],
  'service/src/server/mcp/tasks.ts': ['MCP tasks held', "an MCP task's answer larger than a task keeps"],
  'service/src/server/owner-requests.ts': ['HTTP requests in flight'],
  'service/src/server/sessions/registry.ts': ['the pids all its sessions hold together', 'its running terminals and processes'],
  'service/src/server/sessions/request-ledger.ts': ['creates with a requestId under way'],
  'service/src/server/sessions/shells.ts': ['shells'],
  'service/src/server/sessions/terminal-screen.ts': ['the cells of a terminal screen', 'the cells of a terminal screen'],
  'service/src/server/uploads.ts': ['open uploads'],
  'service/src/server/ws.ts': ['calls in flight', 'subscriptions', 'subscriptions', 'WebSocket connections'],
};

/** An error made with the code, or an error frame that carries it. */
const RAISED = /(?:Error\(\s*|code:\s*)'LIMIT_EXCEEDED'/g;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

describe('LIMIT_EXCEEDED', () => {
  it('names every bound it is raised for', () => {
    const found: Record<string, number> = {};
    for (const file of [...sources('service/src'), ...sources('sdk/src')]) {
      const count = [...readFileSync(file, 'utf8').matchAll(RAISED)].length;
      if (count > 0) found[file] = count;
    }
    expect(found).toEqual(Object.fromEntries(Object.entries(BOUNDS).map(([file, words]) => [file, words.length])));
    const description = ERROR_CATALOG.LIMIT_EXCEEDED.description;
    const missing = Object.values(BOUNDS)
      .flat()
      .filter((words) => !description.includes(words));
    expect(missing).toEqual([]);
  });
});
