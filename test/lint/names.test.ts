/**
 * Names a reader would confuse stay apart: a class of the daemon's server is
 * not named as a class of the SDK (the two ends of one WebSocket are the
 * SDK's Connection and the daemon's ClientLink), and no two test helpers
 * export a function of one name.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** The .ts files under `dir`, recursively. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** The names `pattern` (whose first group is the name) declares in `files`, each with the files declaring it. */
function declared(files: readonly string[], pattern: RegExp): Map<string, string[]> {
  const names = new Map<string, string[]>();
  for (const file of files) {
    for (const match of readFileSync(file, 'utf8').matchAll(pattern)) names.set(match[1]!, [...(names.get(match[1]!) ?? []), file]);
  }
  return names;
}

const CLASS = /^(?:export )?(?:abstract )?class (\w+)/gm;

describe('names', () => {
  it("no class of the daemon's server has the name of a class of the SDK", () => {
    const server = declared(sources('service/src/server'), CLASS);
    const sdk = declared(sources('sdk/src'), CLASS);
    expect(server.size).toBeGreaterThan(5);
    expect(sdk.size).toBeGreaterThan(5);
    const shared = [...server.keys()].filter((name) => sdk.has(name)).map((name) => `${name}: ${[...server.get(name)!, ...sdk.get(name)!].join(', ')}`);
    expect(shared).toEqual([]);
  });

  it('no two test helpers export a function of one name', () => {
    const helpers = declared(sources('test/helpers'), /^export (?:async )?function (\w+)/gm);
    expect(helpers.size).toBeGreaterThan(5);
    const twice = [...helpers].filter(([, files]) => files.length > 1).map(([name, files]) => `${name}: ${files.join(', ')}`);
    expect(twice).toEqual([]);
  });
});
