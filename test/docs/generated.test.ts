/**
 * docs/errors.md and docs/settings.md are what `npm run gen:docs` writes from
 * the error catalog and the settings table, and they hold every code and every
 * setting.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REMOTE_ERROR_CLASSES } from '@execworld/sdk';
import { ERROR_CATALOG, ERROR_CODES } from '@execworld/sdk/protocol';
import { generatedDocs } from '../../scripts/docs-documents.ts';
import { command as serveCommand } from '../../service/src/cli/serve.ts';
import { DEFAULT_CONFIG } from '../../service/src/server/config.ts';
import { readDoc } from '../helpers/docs.ts';

describe('generated pages', () => {
  it.each(generatedDocs().map(([url, text]) => [fileURLToPath(url).replace(/^.*\/(docs\/)/, '$1'), url, text] as const))(
    '%s is fresh (npm run gen:docs)',
    (name, url, text) => {
      let committed = '';
      try {
        committed = readFileSync(url, 'utf8');
      } catch {
        // A missing page fails below like a stale one.
      }
      expect(committed, `${name} is stale: run npm run gen:docs and commit it`).toBe(text);
    },
  );
});

describe('docs/errors.md', () => {
  it('lists every code of the catalog with its status and SDK class', () => {
    const page = readDoc('docs/errors.md');
    for (const code of ERROR_CODES) {
      const row = new RegExp(`^\\| ${ERROR_CATALOG[code].status} \\| \`${code}\` \\| ${REMOTE_ERROR_CLASSES[code].name} \\|`, 'm');
      expect(page, code).toMatch(row);
    }
    expect(page.match(/^\| \d{3} \|/gm)).toHaveLength(ERROR_CODES.length);
  });
});

describe('docs/settings.md', () => {
  it('lists every flag and variable of execworld serve --help with its default', () => {
    const page = readDoc('docs/settings.md');
    const help = serveCommand.help;
    // The settings' flags: not the settings file's, help's or a takeover's (a start of its own, no setting).
    const flags = [...help.matchAll(/^ {2}--([a-z-]+) /gm)]
      .map((match) => match[1]!)
      .filter((flag) => flag !== 'config' && flag !== 'help' && !flag.startsWith('takeover'));
    const envs = [...help.matchAll(/ env (EXECWORLD_[A-Z_]+)$/gm)].map((match) => match[1]!).filter((name) => name !== 'EXECWORLD_CONFIG');
    expect(flags).toHaveLength(Object.keys(DEFAULT_CONFIG).length);
    for (const [index, flag] of flags.entries()) expect(page).toMatch(new RegExp(`^\\| \`--${flag}\`.*\\| \`${envs[index]}\` \\|`, 'm'));
    expect(page).toMatch(/^\| `--port` \| `EXECWORLD_PORT` \| `port` \| `7878` \|/m);
    expect(page).toMatch(/^\| `--ring-bytes` \| `EXECWORLD_RING_BYTES` \| `ringBytes` \| `1048576` \(1 MiB\) \|/m);
    expect(page).toMatch(/^\| `--retention-ms` \| `EXECWORLD_RETENTION_MS` \| `retentionMs` \| `600000` \(10 min\) \|/m);
  });
});
