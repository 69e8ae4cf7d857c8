/**
 * Bundles the browser page's TypeScript (`page/main.ts` and what it imports)
 * into one ES module. The packed service carries the result as `ui/page.js`;
 * a checkout has no build step, so its daemon calls this the first time the
 * page's script is asked for. Only esbuild, a development dependency, is
 * needed, and only here.
 * @module
 */
import { build } from 'esbuild';

/** The page's script with `@xterm/xterm` (from its npm package) bundled in. */
export async function bundlePage(): Promise<string> {
  const result = await build({
    entryPoints: [new URL('page/main.ts', import.meta.url).pathname],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}
