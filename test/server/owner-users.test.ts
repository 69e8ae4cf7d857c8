/**
 * Owners as a real boundary: an owner the token file maps to an OS user runs
 * its programs as that user (uid, gid, no supplementary groups of the daemon,
 * its HOME), its spill files are its own, and it can reach neither the token
 * file nor another owner's programs and files.
 */
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { lookupUser } from '../../service/src/provider/run-as.ts';
import { buildApp, type Daemon } from '../../service/src/server/app.ts';
import { parseTokenFile, resolveUsers, TokenTable } from '../../service/src/server/auth.ts';
import { DEFAULT_CONFIG, type Config } from '../../service/src/server/config.ts';
import { waitFor } from '../helpers/wait.ts';

const asRoot = process.getuid?.() === 0;
const ALICE = 'alice-token-0123456789abcdef';
const BOB = 'bob-token-0123456789abcdefgh';

describe('token files that name OS users', () => {
  const nobody = { name: 'nobody', uid: 65_534, gid: 65_534, home: '/nonexistent', shell: '/usr/sbin/nologin' };
  const lookup = (name: string) => (name === 'nobody' ? nobody : undefined);

  it('parse a third field as the user, and resolve it', () => {
    const entries = parseTokenFile(`alice ${ALICE}\nbob ${BOB} nobody\n`, 'f');
    expect(entries).toEqual([
      { owner: 'alice', token: ALICE },
      { owner: 'bob', token: BOB, userName: 'nobody' },
    ]);
    expect(resolveUsers(entries, 'f', lookup, 0)).toEqual([
      { owner: 'alice', token: ALICE },
      { owner: 'bob', token: BOB, user: nobody },
    ]);
  });

  it('refuse an unknown user, and another user when the daemon is not root', () => {
    expect(() => resolveUsers(parseTokenFile(`bob ${BOB} ghost\n`, 'f'), 'f', lookup, 0)).toThrow(/names OS user ghost, who does not exist/);
    expect(() => resolveUsers(parseTokenFile(`bob ${BOB} nobody\n`, 'f'), 'f', lookup, 1000)).toThrow(/needs the daemon to run as root/);
    // Its own user needs no switch.
    expect(resolveUsers(parseTokenFile(`bob ${BOB} nobody\n`, 'f'), 'f', lookup, 65_534)).toEqual([{ owner: 'bob', token: BOB }]);
  });

  it("keep a read line read-only, with the owner's user from its write line, and a read line may stand alone", () => {
    const READER = 'bob-reader-0123456789abcdef';
    const text = `bob ${BOB} nobody\nbob ${READER} access=read\ncarol ${ALICE}x access=read\n`;
    const entries = parseTokenFile(text, 'f');
    expect(entries).toEqual([
      { owner: 'bob', token: BOB, userName: 'nobody' },
      { owner: 'bob', token: READER, access: 'read' },
      { owner: 'carol', token: `${ALICE}x`, access: 'read' },
    ]);
    const resolved = resolveUsers(entries, 'f', lookup, 0);
    expect(resolved).toEqual([
      { owner: 'bob', token: BOB, user: nobody },
      { owner: 'bob', token: READER, access: 'read' },
      { owner: 'carol', token: `${ALICE}x`, access: 'read' },
    ]);
    const table = new TokenTable(resolved, 'f');
    // The reader's calls are the owner's: its principal runs as the user of the owner's write line.
    expect(table.identify(READER)).toStrictEqual({ owner: 'bob', access: 'read', runAs: nobody, root: undefined });
    expect(table.identify(BOB)).toStrictEqual({ owner: 'bob', access: 'write', runAs: nobody, root: undefined });
    expect(table.identify(`${ALICE}x`)).toStrictEqual({ owner: 'carol', access: 'read', runAs: undefined, root: undefined });
  });

  it('refuse a read line that names a user or a root, saying where they come from', () => {
    expect(() => parseTokenFile(`bob ${BOB} nobody access=read\n`, 'f')).toThrow(
      /f line 1: a read line names no OS user: an owner's OS user and root come from its write lines/,
    );
    expect(() => parseTokenFile(`bob ${BOB} access=read root=/tmp\n`, 'f')).toThrow(/f line 1: a read line takes no root=/);
    expect(() => parseTokenFile(`bob ${BOB} access=none\n`, 'f')).toThrow(/access= must be read or write, not "none"/);
    expect(() => parseTokenFile(`bob ${BOB} access=write access=read\n`, 'f')).toThrow(/access= is given twice/);
    expect(parseTokenFile(`bob ${BOB} access=write\n`, 'f')).toEqual([{ owner: 'bob', token: BOB }]);
  });
});

// Switching users needs root; CI runs as root.
describe.skipIf(!asRoot)('an owner mapped to nobody, on a daemon run by root', () => {
  let daemon: Daemon;
  let url: string;
  const tokenFile = join(mkdtempSync(join(tmpdir(), 'ew-tokens-')), 'tokens');

  beforeAll(async () => {
    writeFileSync(tokenFile, `alice ${ALICE}\nbob ${BOB} nobody\n`, { mode: 0o600 });
    const tokens = new TokenTable(
      resolveUsers(parseTokenFile(`alice ${ALICE}\nbob ${BOB} nobody\n`, tokenFile), tokenFile, (name) => lookupUser(name)),
      tokenFile,
    );
    // A state directory the mapped user can traverse, as the README asks of one with mapped owners.
    const stateDir = mkdtempSync(join(tmpdir(), 'ew-state-'));
    chmodSync(stateDir, 0o711);
    const config = { ...DEFAULT_CONFIG, host: '127.0.0.1', port: 0, logLevel: 'silent', stateDir } as Config;
    daemon = buildApp({ config, tokens, logger: pino({ level: 'silent' }) });
    url = await daemon.app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(() => daemon.app.close());

  const call = async (token: string, method: string, path: string, body?: unknown): Promise<any> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return response.json();
  };
  /** Runs `script` as the token's owner; its stdout, collected with a spill file. */
  const run = async (token: string, script: string): Promise<{ id: string; stdout: string; spillPath: string | null }> => {
    const created = await call(token, 'POST', '/v1/processes', {
      argv: ['/bin/sh', '-c', script],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: { maxBytes: 64, spill: { maxBytes: 1 << 20 } }, stderr: 'pipe' },
      graceMs: 1000,
    });
    await call(token, 'GET', `/v1/processes/${created.id}/done?timeoutMs=30000`);
    const info = await call(token, 'GET', `/v1/processes/${created.id}`);
    const spillPath = info.stdout.spillPath as string | null;
    const read = await call(token, 'GET', `/v1/processes/${created.id}/collected/stdout?from=0`);
    return { id: created.id, stdout: read.text, spillPath };
  };

  it("runs the owner's processes as the user, with only its own group and its HOME", async () => {
    const { stdout } = await run(BOB, 'echo "$(id -u) $(id -g) [$(id -G)] $HOME $USER"');
    expect(stdout).toBe(`65534 65534 [65534] ${lookupUser('nobody')!.home} nobody\n`);
  });

  it("runs the owner's terminals as the user, without the daemon's groups", async () => {
    const terminal = await call(BOB, 'POST', '/v1/terminals', {
      argv: ['/bin/sh', '-c', 'echo "ids=$(id -u):$(id -g):$(id -G)"'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 1000,
    });
    let text = '';
    await waitFor('the ids', async () => {
      const read = await call(BOB, 'GET', `/v1/terminals/${terminal.id}/output?from=0&waitMs=1000`);
      text = Buffer.from(read.data as string, 'base64').toString();
      return text.includes('ids=');
    });
    expect(text).toContain('ids=65534:65534:65534\r\n');
  });

  it('keeps the token file, the daemon and the other owner out of its reach', async () => {
    // Alice's (root's) spill file and a program of hers.
    const alice = await run(ALICE, 'seq 1 100; exec sleep 300 & echo started');
    const sleeper = (await call(ALICE, 'GET', '/v1/processes')).processes.find((p: any) => p.id === alice.id);
    expect(alice.spillPath).not.toBeNull();
    // More than the 64-byte tail first, so the output spills; the answers end it.
    const probe = [
      'seq 1 50',
      `cat ${tokenFile} >/dev/null 2>&1 && echo token:read || echo token:refused`,
      `cat ${alice.spillPath} >/dev/null 2>&1 && echo spill:read || echo spill:refused`,
      `kill -0 ${sleeper.pid} 2>/dev/null && echo signal:sent || echo signal:refused`,
    ].join('; ');
    const bob = await run(BOB, probe);
    expect(bob.stdout.trim().split('\n').slice(-3)).toEqual(['token:refused', 'spill:refused', 'signal:refused']);
    // Its own spill file is its own: the user may read it.
    expect(bob.spillPath).not.toBeNull();
    const own = await run(BOB, `head -1 ${bob.spillPath}`);
    expect(own.stdout).toBe('1\n');
    await call(ALICE, 'DELETE', `/v1/processes/${alice.id}`);
  });
});
