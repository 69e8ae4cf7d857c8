// How a bin finds its program. A checkout runs the TypeScript sources (src/)
// through tsx, so there is no build step while working on them; a package
// installed from npm carries no sources and runs the JavaScript built from
// them (dist/, made by scripts/pack.ts), with no TypeScript loader at all.
import { existsSync } from 'node:fs';
import process from 'node:process';
import { URL } from 'node:url';

/** Imports `src/<module>.ts` when it is there, else `dist/<module>.js`. */
export async function load(module) {
  const source = new URL(`../src/${module}.ts`, import.meta.url);
  if (!existsSync(source)) return import(new URL(`../dist/${module}.js`, import.meta.url).href);
  // tsx would cache what it compiles in the shared temporary directory (tsx-<uid> there), trusting a
  // directory someone else made first, and would remove an old cache there (tsx) by path, following a link
  // another user swapped in: a local user could then plant code this process runs, or have it remove files.
  // A checkout compiles afresh at each start instead (a few hundred milliseconds); every process of the daemon's
  // (its file workers, its session watcher, a takeover's rehearsal) starts through here and says so too.
  process.env.TSX_DISABLE_CACHE = '1';
  const { register } = await import('tsx/esm/api');
  register();
  return import(source.href);
}
