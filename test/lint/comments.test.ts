/**
 * Comments that state a fact the code can change under them stay true: a
 * file that gives its own size in lines ("this one file (about 600 lines)")
 * is within a tenth of it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

const ROOTS = ['sdk/src', 'service/src'];

/** The sizes `text` (the file `file`) gives of itself that are off by more than a tenth. */
function wrongSizes(file: string, text: string): string[] {
  const lines = text.split('\n').length;
  const wrong: string[] = [];
  for (const match of text.matchAll(/about (\d+) lines/g)) {
    const claimed = Number(match[1]);
    if (Math.abs(claimed - lines) > lines / 10) wrong.push(`${file}: says about ${claimed} lines, has ${lines}`);
  }
  return wrong;
}

it('finds a size that is off, and lets one within a tenth be', () => {
  const body = Array.from({ length: 99 }, () => 'code;').join('\n');
  expect(wrongSizes('a.ts', `// this file (about 600 lines)\n${body}`)).toEqual(['a.ts: says about 600 lines, has 100']);
  expect(wrongSizes('b.ts', `// this file (about 95 lines)\n${body}`)).toEqual([]);
});

it('a size a source file gives of itself in lines is within a tenth of its length', () => {
  const wrong: string[] = [];
  for (const root of ROOTS) {
    for (const entry of readdirSync(root, { withFileTypes: true, recursive: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const file = join(entry.parentPath, entry.name);
      wrong.push(...wrongSizes(file, readFileSync(file, 'utf8')));
    }
  }
  expect(wrong).toEqual([]);
});
