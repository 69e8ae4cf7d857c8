/**
 * Bundles what the Windows lane runs under Windows node.exe (the daemon and
 * the Windows-side tests) into plain JavaScript, one file each, since Windows
 * node.exe here has no TypeScript loader. The native modules (koffi,
 * node-pty) stay outside: the lane installs their Windows builds beside the
 * bundles.
 *
 * Usage: tsx scripts/windows/bundle.ts <out-dir>
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { build, type Plugin } from 'esbuild';

const out = process.argv[2];
if (out === undefined) throw new Error('usage: tsx scripts/windows/bundle.ts <out-dir>');
const root = resolve(import.meta.dirname, '../..');
const version = (JSON.parse(readFileSync(resolve(root, 'service/package.json'), 'utf8')) as { version: string }).version;

/** The service's version module reads its manifest beside it; the bundle has the version written in. */
const versionInline: Plugin = {
  name: 'execworld-version',
  setup(context) {
    context.onLoad({ filter: /[\\/]service[\\/]src[\\/]version\.ts$/ }, () => ({
      contents: `export function packageVersion() { return ${JSON.stringify(version)}; }`,
      loader: 'js',
    }));
  },
};

await build({
  entryPoints: {
    execworld: resolve(root, 'scripts/windows/daemon.ts'),
    'provider.win': resolve(root, 'test/windows/provider.win.ts'),
    'bench.win': resolve(root, 'bench/windows.win.ts'),
  },
  outdir: resolve(out),
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // Native modules, the optional accelerators ws tries to load, and the bundler a checkout's daemon loads to make
  // the /ui page's script (the lane never asks its daemon for the page).
  external: ['koffi', 'node-pty', 'bufferutil', 'utf-8-validate', 'esbuild'],
  // Bundled CommonJS asks for require and __dirname, which an ES module does not have.
  banner: {
    js: [
      "import { createRequire as __execworldRequire } from 'node:module';",
      "import { fileURLToPath as __execworldPath } from 'node:url';",
      'const require = __execworldRequire(import.meta.url);',
      'const __filename = __execworldPath(import.meta.url);',
      "const __dirname = __execworldPath(new URL('.', import.meta.url));",
    ].join('\n'),
  },
  plugins: [versionInline],
  logLevel: 'warning',
});
