/**
 * Comments that state a fact the code can change under them stay true: a
 * file that gives its own size in lines ("this one file (about 600 lines)")
 * is within a tenth of it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

const ROOTS = ['sdk/src', 'service/src'];

it('a size a source file gives of itself in lines is within a tenth of its length', () => {
  const claims: string[] = [];
  const wrong: string[] = [];
  for (const root of ROOTS) {
    for (const entry of readdirSync(root, { withFileTypes: true, recursive: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const file = join(entry.parentPath, entry.name);
      const text = readFileSync(file, 'utf8');
      const lines = text.split('\n').length;
      for (const match of text.matchAll(/about (\d+) lines/g)) {
        const claimed = Number(match[1]);
        claims.push(file);
        if (Math.abs(claimed - lines) > lines / 10) wrong.push(`${file}: says about ${claimed} lines, has ${lines}`);
      }
    }
  }
  expect(wrong).toEqual([]);
  // What it checks is there to check: sdk/src/remote/connection.ts gives its size.
  expect(claims.length).toBeGreaterThan(0);
});
