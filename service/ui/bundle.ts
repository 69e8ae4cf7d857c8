/**
 * Bundles the browser page's TypeScript (`page/main.ts` and what it imports)
 * into one ES module. The packed service carries the result as `ui/page.js`;
 * a checkout has no build step, so its daemon calls this the first time the
 * page's script is asked for. Only esbuild, a development dependency, is
 * needed, and only here.
 *
 * The page takes the SDK through its package's exports
 * (`@execworld/sdk/client`, `@execworld/sdk/protocol`), which reach nothing of
 * Node; `platform: 'browser'` makes a Node built-in in that graph a build
 * error rather than a `require` left in the bundle.
 * @module
 */
import { build, type BuildOptions } from 'esbuild';

/** How the page is built: the test of the bundle builds it so too, with a metafile. */
export const PAGE_BUILD: BuildOptions = {
  entryPoints: [new URL('page/main.ts', import.meta.url).pathname],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  write: false,
  minify: true,
  legalComments: 'none',
  logLevel: 'silent',
};

/** The page's script with `@xterm/xterm` (from its npm package) and the SDK's protocol client bundled in. */
export async function bundlePage(): Promise<string> {
  const result = await build({ ...PAGE_BUILD, write: false });
  return result.outputFiles[0]!.text;
}
