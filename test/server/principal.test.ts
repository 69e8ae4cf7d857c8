/**
 * Who calls is resolved once, when its token is: the token table answers a
 * principal (owner, access, OS user, root), and every call carries it, so the
 * sessions, files and transfers of a call are made as its principal says,
 * without the owner's name being looked up again anywhere.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunAs } from '../../service/src/provider/api.ts';
import { HostFiles } from '../../service/src/provider/fs/host-files.ts';
import { TokenTable, type Principal } from '../../service/src/server/auth.ts';
import { composeDaemon, type DaemonParts } from '../../service/src/server/compose.ts';
import { DEFAULT_CONFIG, type Config } from '../../service/src/server/config.ts';
import type { Caller } from '../../service/src/server/dispatch.ts';
import { MemoryProvider } from '../helpers/memory-provider.ts';

const WRITER = 'dora-token-0123456789abcdef';
const READER = 'dora-reader-0123456789abcdef';

describe("a token's principal", () => {
  it('is resolved when the token is, a read line taking the user and root of its owner', () => {
    const dora: RunAs = { name: 'dora', uid: 4242, gid: 4242, home: '/home/dora', shell: '/bin/sh' };
    const table = new TokenTable(
      [
        { owner: 'dora', token: WRITER, user: dora, root: '/srv/dora' },
        { owner: 'dora', token: READER, access: 'read' },
      ],
      'test',
    );
    expect(table.identify(WRITER)).toStrictEqual({ owner: 'dora', access: 'write', runAs: dora, root: '/srv/dora' });
    expect(table.identify(READER)).toStrictEqual({ owner: 'dora', access: 'read', runAs: dora, root: '/srv/dora' });
    // Resolved once: each authentication answers the same principal, which nobody can change.
    expect(table.identify(READER)).toBe(table.identify(READER));
    expect(Object.isFrozen(table.identify(WRITER))).toBe(true);
  });
});

describe('a call', () => {
  let parts: DaemonParts | undefined;
  afterEach(async () => {
    await parts?.close();
    parts = undefined;
  });

  /** A daemon whose token table knows nobody: whatever its calls do as someone comes from the principal they carry. */
  function daemon(provider: MemoryProvider): DaemonParts {
    const config = { ...DEFAULT_CONFIG, logLevel: 'silent' } as Config;
    parts = composeDaemon({
      config,
      tokens: new TokenTable([], 'nobody'),
      logger: pino({ level: 'silent' }),
      version: 'test',
      runtime: provider,
      files: new HostFiles(),
      ownsHostProcess: false,
    });
    return parts;
  }

  const call = (parts: DaemonParts, principal: Principal, name: string, params: unknown): Promise<unknown> => {
    const caller: Caller = { principal, transport: 'rest', signal: new AbortController().signal, unbounded: false, where: 'body' };
    return parts.dispatcher.call(parts.dispatcher.operation(name), caller, params);
  };

  it("starts programs as its principal's OS user, in its home, whatever its owner is called", async () => {
    const provider = new MemoryProvider();
    const parts = daemon(provider);
    const erin: RunAs = { name: 'erin', uid: 4343, gid: 4343, home: '/home/erin', shell: '/bin/sh' };
    const principal: Principal = { owner: 'someone', access: 'write', runAs: erin, root: undefined };
    const created = (await call(parts, principal, 'process.create', { argv: ['true'] })) as { id: string; cwd: string };
    expect(provider.processes[0]!.extensions.runAs).toBe(erin);
    expect(created.cwd).toBe('/home/erin');
    await call(parts, principal, 'terminal.create', { argv: ['sh'], rows: 24, cols: 80 });
    expect(provider.terminals[0]!.extensions.runAs).toBe(erin);
    // The owner's user, named as such, is no switch; another user is refused before anything starts.
    await call(parts, principal, 'process.create', { argv: ['true'], user: '4343' });
    expect(provider.processes[1]!.extensions.runAs).toBe(erin);
    await expect(call(parts, principal, 'process.create', { argv: ['true'], user: 'root' })).rejects.toMatchObject({ code: 'USER_NOT_ALLOWED' });
    expect(provider.processes).toHaveLength(2);
    // What it started is its owner's, and no one else's.
    const other: Principal = { owner: 'someone else', access: 'write', runAs: undefined, root: undefined };
    await expect(call(parts, other, 'process.get', { id: created.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it("reaches the files within its principal's root only, and acts only as its access allows", async () => {
    const parts = daemon(new MemoryProvider());
    const root = mkdtempSync(join(tmpdir(), 'ew-principal-'));
    mkdirSync(join(root, 'inside'));
    writeFileSync(join(root, 'inside', 'note.txt'), 'kept\n');
    const outside = mkdtempSync(join(tmpdir(), 'ew-outside-'));
    writeFileSync(join(outside, 'secret.txt'), 'not yours\n');
    const confined: Principal = { owner: 'someone', access: 'write', runAs: undefined, root };
    expect(await call(parts, confined, 'fs.readText', { path: 'inside/note.txt' })).toEqual({ text: 'kept\n' });
    await expect(call(parts, confined, 'fs.readText', { path: join(outside, 'secret.txt') })).rejects.toMatchObject({ code: 'FS_PERMISSION_DENIED' });
    await expect(call(parts, confined, 'fs.mkdir', { path: join(outside, 'made') })).rejects.toMatchObject({ code: 'FS_PERMISSION_DENIED' });
    expect(await call(parts, confined, 'fs.mkdir', { path: 'made', parents: false })).toMatchObject({ path: join(root, 'made'), created: true });
    const reader: Principal = { ...confined, access: 'read' };
    expect(await call(parts, reader, 'identity.get', {})).toEqual({ owner: 'someone', access: 'read' });
    await expect(call(parts, reader, 'fs.mkdir', { path: 'again', parents: false })).rejects.toMatchObject({ code: 'READ_ONLY' });
  });
});
