/**
 * The committed openapi/ files are exactly what the schemas generate, and the
 * error catalog lists exactly the codes the daemon can answer with.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, OPERATION_LIST } from '@execworld/sdk/protocol';
import { generatedDocuments } from '../../scripts/openapi-documents.ts';

describe('openapi/', () => {
  it.each(generatedDocuments().map(([url, text]) => [url.pathname.split('/').pop()!, url, text] as const))(
    '%s is fresh (npm run gen:openapi)',
    (_name, url, text) => {
      expect(readFileSync(url, 'utf8'), `${url.pathname} is stale: run npm run gen:openapi and commit it`).toBe(text);
    },
  );

  it('documents every operation under its name', () => {
    const document = JSON.parse(readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8'));
    const ids = Object.values(document.paths).flatMap((path: any) => Object.values(path).map((operation: any) => operation.operationId));
    // Beside the table's operations (those that carry bytes too): the WebSocket.
    expect(ids.sort()).toEqual([...OPERATION_LIST.map((spec) => spec.name), 'connect'].sort());
  });
});

describe('error catalog', () => {
  it('holds exactly the codes the daemon and provider code can produce', () => {
    const root = fileURLToPath(new URL('../../service/src', import.meta.url));
    const sources = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [readFileSync(join(dir, entry.name), 'utf8')] : [],
      );
    const text = sources(root).join('\n');
    const unused = ERROR_CODES.filter((code) => !text.includes(`'${code}'`));
    expect(unused).toEqual([]);
  });
});
