// How a bin finds its program. A checkout runs the TypeScript sources (src/)
// through tsx, so there is no build step while working on them; a package
// installed from npm carries no sources and runs the JavaScript built from
// them (dist/, made by scripts/pack.ts), with no TypeScript loader at all.
import { existsSync } from 'node:fs';
import { URL } from 'node:url';

/** Imports `src/<module>.ts` when it is there, else `dist/<module>.js`. */
export async function load(module) {
  const source = new URL(`../src/${module}.ts`, import.meta.url);
  if (!existsSync(source)) return import(new URL(`../dist/${module}.js`, import.meta.url).href);
  const { register } = await import('tsx/esm/api');
  register();
  return import(source.href);
}
