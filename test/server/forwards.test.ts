/**
 * The daemon's table of port forwards on its own, with principals as a minted
 * token resolves them: the port it is scoped to is the only one it reaches,
 * whatever its access, and a forward of a token that expires is reset when it
 * expires. The world's side is a server of this test, which sees how its
 * connections end.
 */
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { portConnector } from '../../service/src/provider/port-connect.ts';
import type { Principal } from '../../service/src/server/auth.ts';
import { ForwardTable } from '../../service/src/server/forwards.ts';
import { waitFor } from '../helpers/wait.ts';

const servers: Server[] = [];
const tables: ForwardTable[] = [];
afterEach(() => {
  for (const table of tables.splice(0)) table.shutdown();
  for (const server of servers.splice(0)) server.close();
});

/** A server in the world: its port, and how each of its connections ended. */
async function world(): Promise<{ port: number; ended: string[] }> {
  const ended: string[] = [];
  const server = createServer((connection) => {
    connection.on('error', (error: NodeJS.ErrnoException) => ended.push(error.code ?? 'error'));
    connection.on('close', () => ended.push('closed'));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, ended };
}

function table(): ForwardTable {
  const made = new ForwardTable({ maxPerOwner: 8, graceMs: 60_000, connect: portConnector(() => ({ of: () => undefined })) });
  tables.push(made);
  return made;
}

const minted = (scope: { port?: number; expiresAt?: number }, access: 'read' | 'write' = 'read'): Principal => ({
  owner: 'alice',
  access,
  runAs: undefined,
  root: undefined,
  minted: { id: 'tok_1', expiresAt: scope.expiresAt ?? Date.now() + 3_600_000, port: scope.port },
});

describe('ForwardTable', () => {
  it('lets a read token scoped to a port reach that port, and no other', async () => {
    const { port } = await world();
    const other = await world();
    const forwards = table();
    await expect(forwards.connect(minted({ port }), port)).resolves.toMatchObject({ port });
    await expect(forwards.connect(minted({ port }), other.port)).rejects.toMatchObject({ code: 'TOKEN_SCOPE' });
    // A read token of the token file (no scope) reaches no port.
    await expect(forwards.connect({ owner: 'alice', access: 'read', runAs: undefined, root: undefined }, port)).rejects.toMatchObject({ code: 'READ_ONLY' });
  });

  it('resets a forward when its token expires', async () => {
    const { port, ended } = await world();
    const forwards = table();
    const expiresAt = Date.now() + 500;
    const forward = await forwards.connect(minted({ port, expiresAt }), port);
    await waitFor('the connection in the world to end', () => ended.includes('closed'));
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt);
    expect(ended).toContain('ECONNRESET');
    expect(() => forwards.get(minted({ port }), forward.id)).toThrow(/no forward/);
  });
});
