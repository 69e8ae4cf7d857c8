import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lookupUser } from '../../service/src/provider/run-as.ts';
import { loadTokens, parseTokenFile, TokenTable } from '../../service/src/server/auth.ts';
import { command as serveCommand, serveConfig } from '../../service/src/cli/serve.ts';
import { ConfigError, DEFAULT_CONFIG } from '../../service/src/server/config.ts';

const dir = mkdtempSync(join(tmpdir(), 'execworld-config-'));

describe('serveConfig', () => {
  it('has finite, loopback defaults', () => {
    expect(serveConfig([], {}).config).toEqual(DEFAULT_CONFIG);
    expect(DEFAULT_CONFIG.host).toBe('127.0.0.1');
    for (const key of ['maxBodyBytes', 'bodyBudgetBytes', 'maxFrameBytes', 'maxSessionsPerOwner', 'ringBytes', 'retentionMs'] as const) {
      expect(Number.isFinite(DEFAULT_CONFIG[key])).toBe(true);
    }
  });

  it('takes a file, then the environment, then flags', () => {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ port: 1111, ringBytes: 2048, logLevel: 'debug' }));
    const { config } = serveConfig(['--config', file, '--port', '3333'], {
      EXECWORLD_PORT: '2222',
      EXECWORLD_RING_BYTES: '4096',
      EXECWORLD_ALLOWED_ORIGINS: 'http://a.example, http://b.example',
    });
    expect(config).toMatchObject({ port: 3333, ringBytes: 4096, logLevel: 'debug', allowedOrigins: ['http://a.example', 'http://b.example'] });
    expect(Object.isFrozen(config)).toBe(true);
    expect(serveConfig(['--allowed-origin', 'http://x.example', '--allowed-origin', 'http://y.example'], {}).config.allowedOrigins).toEqual([
      'http://x.example',
      'http://y.example',
    ]);
  });

  it('names the setting and its source when a value is bad', () => {
    expect(() => serveConfig(['--port', '70000'], {})).toThrow(/--port/);
    expect(() => serveConfig([], { EXECWORLD_RING_BYTES: '-1' })).toThrow(/EXECWORLD_RING_BYTES/);
    expect(() => serveConfig(['--log-level', 'loud'], {})).toThrow(ConfigError);
    expect(() => serveConfig(['--bogus'], {})).toThrow(/bogus/);
    expect(() => serveConfig(['--tls-cert', '/x.pem'], {})).toThrow(/go together/);
    // A body a call takes must fit in the budget of all bodies.
    expect(() => serveConfig(['--max-body-bytes', '2048', '--body-budget-bytes', '1024'], {})).toThrow(
      /--body-budget-bytes \(1024\) must be at least --max-body-bytes/,
    );
    const file = join(dir, 'unknown.json');
    writeFileSync(file, JSON.stringify({ porttt: 1 }));
    expect(() => serveConfig(['--config', file], {})).toThrow(/unknown setting porttt/);
    writeFileSync(file, '{ nope');
    expect(() => serveConfig(['--config', file], {})).toThrow(/cannot read config file/);
  });

  it('documents every flag with its environment variable', () => {
    const help = serveCommand.help;
    for (const flag of ['--host', '--port', '--token-file', '--tls-cert', '--log-level', '--max-sessions', '--ring-bytes']) expect(help).toContain(flag);
    expect(serveConfig(['--help'], {}).help).toBe(true);
  });
});

describe('tokens', () => {
  it('reads a bare token or owner lines, and refuses short tokens and bad lines', () => {
    expect(parseTokenFile('q7Vd-2mKx9Lp4wRz\n', 'f')).toEqual([{ owner: 'default', token: 'q7Vd-2mKx9Lp4wRz' }]);
    expect(parseTokenFile('# team\n\nalice 3f9c1a7e52b8d046\nbob   e41b09d7c2a85f63\n', 'f')).toEqual([
      { owner: 'alice', token: '3f9c1a7e52b8d046' },
      { owner: 'bob', token: 'e41b09d7c2a85f63' },
    ]);
    expect(() => parseTokenFile('short', 'f')).toThrow(/shorter than 16/);
    expect(() => parseTokenFile('a b c', 'f')).toThrow(/line 1/);
    expect(() => parseTokenFile('\n# nothing\n', 'f')).toThrow(/no token/);
  });

  it('maps tokens to owners and their access, and nothing else to anyone', () => {
    const table = new TokenTable(
      [
        { owner: 'alice', token: 'alice-token-000000000' },
        { owner: 'bob', token: 'bob-token-0000000000' },
        { owner: 'alice', token: 'alice-reader-00000000', access: 'read' },
        { owner: 'carol', token: 'carol-token-000000000', access: 'write' },
      ],
      'test',
    );
    expect(table.identify('alice-token-000000000')).toEqual({ owner: 'alice', access: 'write' });
    expect(table.identify('bob-token-0000000000')).toEqual({ owner: 'bob', access: 'write' });
    expect(table.identify('alice-reader-00000000')).toEqual({ owner: 'alice', access: 'read' });
    expect(table.identify('carol-token-000000000')).toEqual({ owner: 'carol', access: 'write' });
    expect(table.identify('alice-token-00000000')).toBeUndefined();
    expect(table.identify('')).toBeUndefined();
    expect(table.identify(undefined)).toBeUndefined();
    expect(table.owners).toEqual(['alice', 'bob', 'carol']);
  });

  it('generates a user-only token once, reuses it, and refuses a token file others can read', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'execworld-token-')), 'sub', 'token');
    const first = loadTokens(undefined, file, lookupUser);
    expect(first.generated).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(file, '..')).mode & 0o777).toBe(0o700);
    const second = loadTokens(undefined, file, lookupUser);
    expect(second.generated).toBe(false);
    expect(second.table.owners).toEqual(['default']);
    const open = join(dir, 'open-token');
    writeFileSync(open, 'alice 0123456789abcdef01\n', { mode: 0o644 });
    expect(() => loadTokens(open, file, lookupUser)).toThrow(/readable by other users/);
  });
});
