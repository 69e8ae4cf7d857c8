/**
 * The SDK's root entry runs anywhere Node runs: nothing it reaches may import
 * node-pty, child processes, the service, or the @deepseek-ai packages (those
 * are peers of the `@execworld/sdk/dsh` entry only).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const sdkSrc = resolve(dirname(fileURLToPath(import.meta.url)), '../../sdk/src');
const FORBIDDEN = [/^node-pty$/, /^node:child_process$/, /^@execworld\/service/, /^@deepseek-ai\//];

/** Every module specifier reachable from `entry` through relative imports. */
function reachableImports(entry: string): { files: string[]; specifiers: Set<string> } {
  const files: string[] = [];
  const specifiers = new Set<string>();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (files.includes(file)) continue;
    files.push(file);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
      const specifier = match[1] ?? match[2]!;
      if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier));
      else specifiers.add(specifier);
    }
  }
  return { files, specifiers };
}

describe('@execworld/sdk root entry', () => {
  it('reaches no Node-only process code and no harness package', () => {
    const { files, specifiers } = reachableImports(resolve(sdkSrc, 'index.ts'));
    expect(files.length).toBeGreaterThan(1);
    const forbidden = [...specifiers].filter((specifier) => FORBIDDEN.some((pattern) => pattern.test(specifier)));
    expect(forbidden).toEqual([]);
  });

  it('keeps the harness packages to the dsh entry', () => {
    const { specifiers } = reachableImports(resolve(sdkSrc, 'dsh/plugin.ts'));
    expect([...specifiers]).toContain('@deepseek-ai/dsh-subprocess');
  });
});
