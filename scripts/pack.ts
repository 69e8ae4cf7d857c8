/**
 * Builds `@execworld/sdk` and `@execworld/service` to JavaScript with
 * declarations and packs each as npm publishes it: one tarball per package,
 * holding `dist/` (and the service's `bin/` and `ui/`, its browser view), a manifest whose `exports`
 * point at the built files and their types, the README and the licence. No
 * TypeScript source and no TypeScript loader goes in; a checkout keeps
 * running its sources (the manifests in the repository point at `src/`).
 *
 * Usage: tsx scripts/pack.ts [out-dir]   (default .cache/pack)
 * Prints one JSON line per tarball: its file, packed size and file count.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { bundlePage } from '../service/ui/bundle.ts';

const root = resolve(import.meta.dirname, '..');
const out = resolve(process.argv[2] ?? join(root, '.cache/pack'));
const tree = join(out, 'tree');

/** What a package's manifest says of itself, as far as packing needs it. */
interface Manifest {
  name: string;
  version: string;
  exports: Record<string, string>;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  files?: string[];
  [field: string]: unknown;
}

/** A source entry (`./src/x.ts`) as the built package exports it: types first, as TypeScript reads the conditions in order. */
export function builtExport(source: string): { types: string; default: string } {
  const match = /^\.\/src\/(.+)\.ts$/.exec(source);
  if (match === null) throw new Error(`an export that is not a TypeScript source under src/: ${source}`);
  return { types: `./dist/${match[1]}.d.ts`, default: `./dist/${match[1]}.js` };
}

/**
 * The compiler rewrites `./x.ts` to `./x.js` in the JavaScript it emits, but
 * leaves the declarations' specifiers as written; TypeScript 5 resolves those,
 * older consumers do not. Relative specifiers only: a package name is never
 * rewritten.
 */
export function declarationSpecifiers(text: string): string {
  return text.replace(/(\bfrom\s+|\bimport\s*\(\s*)(['"])(\.{1,2}\/[^'"]*)\.ts\2/g, '$1$2$3.js$2');
}

function build(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', tree], { stdio: 'inherit' });
  for (const entry of readdirSync(tree, { recursive: true, encoding: 'utf8' })) {
    if (!entry.endsWith('.d.ts')) continue;
    const path = join(tree, entry);
    writeFileSync(path, declarationSpecifiers(readFileSync(path, 'utf8')));
  }
}

async function pack(dir: 'sdk' | 'service'): Promise<void> {
  const manifest = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as Manifest;
  const stage = join(out, dir);
  cpSync(join(tree, dir, 'src'), join(stage, 'dist'), { recursive: true });
  const files = ['dist'];
  if (manifest.bin !== undefined) {
    cpSync(join(root, dir, 'bin'), join(stage, 'bin'), { recursive: true });
    files.push('bin');
  }
  if (dir === 'service') {
    // The browser view: its page and styles as written, its script bundled (the daemon serves ui/ beside dist/).
    mkdirSync(join(stage, 'ui'));
    for (const file of ['index.html', 'page.css']) cpSync(join(root, dir, 'ui', file), join(stage, 'ui', file));
    writeFileSync(join(stage, 'ui', 'page.js'), await bundlePage());
    files.push('ui');
  }
  cpSync(join(root, dir, 'README.md'), join(stage, 'README.md'));
  cpSync(join(root, 'LICENSE'), join(stage, 'LICENSE'));
  const exports = Object.fromEntries(Object.entries(manifest.exports).map(([path, source]) => [path, builtExport(source)]));
  const built = { ...manifest, exports, files };
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(built, null, 2)}\n`);
  const report = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: stage, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }),
  ) as Array<{ filename: string; size: number; unpackedSize: number; entryCount: number }>;
  for (const { filename, size, unpackedSize, entryCount } of report) {
    process.stdout.write(`${JSON.stringify({ package: manifest.name, tarball: join(out, filename), size, unpackedSize, files: entryCount })}\n`);
  }
}

// The output directory is emptied first: never the repository or a directory above it.
const within = relative(out, root);
if (!within.startsWith('..') && !isAbsolute(within)) throw new Error(`${out} holds the repository; give pack.ts a directory of its own`);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
build();
await pack('sdk');
await pack('service');
rmSync(tree, { recursive: true, force: true });
