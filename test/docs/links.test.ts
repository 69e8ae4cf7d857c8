/**
 * The pages lead where they say: every relative link of README.md,
 * CONTRIBUTING.md and docs/*.md names a file of the repository, and a heading
 * of it when the link has an anchor; every repository path the pages name in
 * code is there.
 */
import { existsSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchors, docFiles, prose, readDoc, ROOT, withoutFences } from '../helpers/docs.ts';

const FILES = docFiles();

interface Link {
  file: string;
  target: string;
}

function links(file: string): Link[] {
  return [...prose(readDoc(file)).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => ({ file, target: match[1]! }))
    .filter((link) => !/^[a-z][a-z0-9+.-]*:/i.test(link.target));
}

describe('relative links', () => {
  const all = FILES.flatMap(links);

  it('are there to check', () => {
    expect(all.filter((link) => link.file === 'README.md').length).toBeGreaterThan(10);
    expect(all.some((link) => link.target.includes('#'))).toBe(true);
  });

  it.each(FILES)('of %s lead to a file, and to a heading of it when they name one', (file) => {
    const broken: string[] = [];
    for (const { target } of links(file)) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const resolved = path === '' ? file : normalize(relative(ROOT, join(ROOT, dirname(file), decodeURIComponent(path))));
      if (!existsSync(join(ROOT, resolved))) {
        broken.push(`${target}: no ${resolved}`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith('.md') && !anchors(readDoc(resolved)).has(anchor))
        broken.push(`${target}: no heading #${anchor} in ${resolved}`);
    }
    expect(broken).toEqual([]);
  });
});

describe('repository paths named in code', () => {
  const TOP = /^(?:sdk|service|test|bench|scripts|docs|docker|deploy|openapi|\.ci)\//;

  it.each(FILES)('in %s are there', (file) => {
    const named = [...withoutFences(readDoc(file)).matchAll(/`([^`\s]+)`/g)]
      .map((match) => match[1]!.replace(/[:.,;]$/, ''))
      .filter((path) => TOP.test(path) && !/[*…<>{}]/.test(path));
    const missing = named.filter((path) => !existsSync(join(ROOT, path)));
    expect(missing).toEqual([]);
  });
});
