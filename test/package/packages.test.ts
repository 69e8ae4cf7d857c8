/**
 * The packages as a user gets them: `scripts/pack.ts` builds and packs both,
 * a fresh project installs the two tarballs with npm, plain `node` (no
 * TypeScript loader) imports the SDK and drives a daemon started with
 * `npx execworld serve` from the same install, and `tsc` type-checks a
 * consumer against the packed declarations.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveFrom, type DaemonProcess } from '../helpers/daemon-process.ts';
import { killMarked, markerPids, uniqueSleepMarker } from '../helpers/proc.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const TSX = join(ROOT, 'node_modules/.bin/tsx');
/** The versions of the repository's own TypeScript and Node types, which the consumer installs beside the tarballs. */
const DEV = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies;

interface Packed {
  package: string;
  tarball: string;
  size: number;
  unpackedSize: number;
  files: number;
}

interface Manifest {
  exports: Record<string, { types: string; default: string }>;
  dependencies: Record<string, string>;
  bin?: Record<string, string>;
}

let work: string;
let packed: Packed[];
let project: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'execworld-packages-'));
  const { stdout } = await run(TSX, [join(ROOT, 'scripts/pack.ts'), join(work, 'pack')], { cwd: ROOT });
  packed = stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Packed);
  project = join(work, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  await run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      ...packed.map((entry) => entry.tarball),
      `@types/node@${DEV['@types/node']}`,
      `typescript@${DEV.typescript}`,
    ],
    { cwd: project },
  );
}, 300_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** The consumer project's tsc over its tsconfig: empty when it type-checks, else the errors. */
async function typeCheck(): Promise<string> {
  return run(process.execPath, [join(project, 'node_modules/typescript/bin/tsc'), '-p', project], { cwd: project }).then(
    () => '',
    (error: { stdout: string }) => error.stdout,
  );
}

async function listing(tarball: string): Promise<string[]> {
  const { stdout } = await run('tar', ['-tzf', tarball]);
  return stdout.trim().split('\n');
}

async function manifestOf(tarball: string): Promise<Manifest> {
  const { stdout } = await run('tar', ['-xzOf', tarball, 'package/package.json']);
  return JSON.parse(stdout) as Manifest;
}

describe('the packed tarballs', () => {
  it('hold built JavaScript and declarations, no TypeScript source, and export only files they hold', async () => {
    expect(packed.map((entry) => entry.package)).toEqual(['@execworld/sdk', '@execworld/service']);
    for (const { tarball } of packed) {
      const files = await listing(tarball);
      expect(files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
      expect(files).toContain('package/LICENSE');
      expect(files).toContain('package/README.md');
      const manifest = await manifestOf(tarball);
      for (const [path, target] of Object.entries(manifest.exports)) {
        expect(files, `${path} types`).toContain(`package/${target.types.slice(2)}`);
        expect(files, `${path} code`).toContain(`package/${target.default.slice(2)}`);
      }
      // The loader is for working on the sources; an installed package runs without one.
      expect(Object.keys(manifest.dependencies)).not.toContain('tsx');
    }
    const service = await manifestOf(packed[1]!.tarball);
    expect(service.bin).toEqual({ execworld: './bin/execworld.js' });
    const files = await listing(packed[1]!.tarball);
    expect(files).toEqual(
      expect.arrayContaining([
        'package/bin/execworld.js',
        'package/bin/entry.js',
        'package/bin/file-worker.js',
        'package/bin/session-watcher.js',
        'package/dist/cli.js',
        'package/dist/provider/containment/session-watcher.js',
      ]),
    );
    // The browser view: its script built, not its TypeScript or the bundler.
    expect(files.filter((file) => file.startsWith('package/ui/')).sort()).toEqual(['package/ui/index.html', 'package/ui/page.css', 'package/ui/page.js']);
  });

  it('are about the sizes docs/sdk.md gives (within a fifth)', () => {
    const page = readFileSync(join(ROOT, 'docs/sdk.md'), 'utf8');
    const stated = [...page.matchAll(/`(execworld-[a-z]+)-[\d.]+\.tgz` \(about (\d+) kB packed, (\d+) files\)/g)];
    expect(stated.map((match) => match[1])).toEqual(['execworld-sdk', 'execworld-service']);
    for (const [, name, kB, files] of stated) {
      const entry = packed.find((each) => basename(each.tarball).startsWith(`${name}-`))!;
      console.log(`${name}: ${(entry.size / 1000).toFixed(1)} kB packed, ${entry.files} files (docs/sdk.md: about ${kB} kB, ${files} files)`);
      expect(entry.size / 1000 / Number(kB), `${name}'s size`).toBeGreaterThan(0.8);
      expect(entry.size / 1000 / Number(kB), `${name}'s size`).toBeLessThan(1.2);
      expect(entry.files / Number(files), `${name}'s files`).toBeGreaterThan(0.8);
      expect(entry.files / Number(files), `${name}'s files`).toBeLessThan(1.2);
    }
  });

  it('declarations name their neighbours by their .js files', () => {
    const sdk = join(project, 'node_modules/@execworld/sdk/dist/index.d.ts');
    const text = readFileSync(sdk, 'utf8');
    expect(text).toMatch(/from '\.\/remote\/runtime\.js'/);
    expect(text).not.toMatch(/from '\.[^']*\.ts'/);
  });
});

describe('a fresh project that installed the tarballs', () => {
  let daemon: DaemonProcess | undefined;
  afterAll(async () => {
    await daemon?.stop();
  });

  it('runs the daemon with npx execworld serve, and plain node drives it through the SDK', async () => {
    const env = { PATH: process.env.PATH, HOME: project, XDG_CONFIG_HOME: join(project, 'config'), XDG_STATE_HOME: join(project, 'state') };
    // By hand: `npx execworld serve` in the project that installed the packed tarballs (test/lint/daemon-fixtures.test.ts lists it).
    daemon = await serveFrom(['npx', '--no-install', 'execworld', 'serve', '--port', '0'], { cwd: project, env });
    const script = join(project, 'use.mjs');
    writeFileSync(
      script,
      `
import { connect } from '@execworld/sdk';
import { ERROR_CODES } from '@execworld/sdk/protocol';
import { LocalRuntime } from '@execworld/service';
const runtime = await connect(process.argv[2]);
try {
  const child = runtime.spawn({
    argv: ['/bin/sh', '-c', 'read line; echo "got $line"; exit 3'],
    cwd: '/',
    stdio: { stdin: 'pipe', stdout: { maxBytes: 65536 }, stderr: { maxBytes: 65536 } },
    graceMs: 5000,
  });
  child.stdin.end('packed\\n');
  const done = await child.done;
  const terminal = await runtime.spawnTerminal({ argv: ['/bin/sh'], cwd: '/', rows: 24, cols: 80, graceMs: 3000 });
  await terminal.write('exit 7\\n');
  const terminalDone = await terminal.done;
  console.log(JSON.stringify({
    done,
    stdout: child.collected.stdout.readFrom(0).text,
    terminalDone,
    codes: ERROR_CODES.includes('INVALID_ARGUMENT'),
    local: typeof LocalRuntime,
  }));
} finally {
  await runtime.dispose();
}
`,
    );
    const { stdout } = await run(process.execPath, [script, daemon.url], { cwd: project, env });
    expect(JSON.parse(stdout)).toEqual({
      done: { exitCode: 3, signal: null },
      stdout: 'got packed\n',
      terminalDone: { exitCode: 7, signal: null },
      codes: true,
      local: 'function',
    });
    // The browser view is served from the built script: the installed package has no bundler to make it.
    const page = await fetch(`${daemon.url}/ui`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('/ui/page.js');
    const built = await fetch(`${daemon.url}/ui/page.js`);
    expect(built.status).toBe(200);
    expect((await built.text()).length).toBeGreaterThan(100_000);
    expect(existsSync(join(project, 'node_modules/esbuild'))).toBe(false);
    // SIGTERM ends the daemon, and with it npx.
    const pid = daemon.pid;
    await daemon.stop();
    daemon = undefined;
    expect(pidAlive(pid)).toBe(false);
  }, 120_000);

  it('ends the sessions of an installed daemon that is SIGKILLed, through its session watcher (built, with no TypeScript loader)', async () => {
    const env = { PATH: process.env.PATH, HOME: project, XDG_CONFIG_HOME: join(project, 'config'), XDG_STATE_HOME: join(project, 'state') };
    // By hand: `npx execworld serve` in the project that installed the packed tarballs (test/lint/daemon-fixtures.test.ts lists it).
    daemon = await serveFrom(['npx', '--no-install', 'execworld', 'serve', '--port', '0'], { cwd: project, env });
    const marker = uniqueSleepMarker();
    try {
      const response = await fetch(`${daemon.url}/v1/processes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          argv: ['/bin/sh', '-c', `sleep ${marker}`],
          cwd: '/',
          stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
          graceMs: 1000,
        }),
      });
      expect(response.status).toBe(201);
      await waitFor('the sleep', () => markerPids(marker).length === 1);
      const pid = daemon.pid;
      process.kill(pid, 'SIGKILL');
      daemon = undefined;
      await waitFor('the sleep to end', () => markerPids(marker).length === 0, 30_000);
      // The watcher, not a later start, ended it: it removed the dead daemon's record.
      await waitFor('the record to be removed', () => readdirSync(join(project, 'state/execworld/sessions')).length === 0, 30_000);
    } finally {
      killMarked(marker);
    }
  }, 120_000);

  it('type-checks a consumer against the packed declarations', async () => {
    writeFileSync(
      join(project, 'consumer.ts'),
      `
import { connect, type SubprocessRuntime, type SubprocessOutcome } from '@execworld/sdk';
import { RemoteFiles } from '@execworld/sdk/fs';
import { ERROR_CODES, type ErrorCode } from '@execworld/sdk/protocol';
import { LocalRuntime } from '@execworld/service';

export async function exitCodeOf(url: string): Promise<number | null> {
  const runtime: SubprocessRuntime = await connect(url, { token: 'x', headers: { 'x-sandbox-id': 'one' } });
  const child = runtime.spawn({ argv: ['/bin/true'], cwd: '/', stdio: { stdin: 'ignore', stdout: { maxBytes: 1024 }, stderr: { maxBytes: 1024 } }, graceMs: 1000 });
  const outcome: SubprocessOutcome = await child.done;
  // @ts-expect-error a pid is a number: the declarations must say so, or this line is an error of its own
  const pid: string = child.pid;
  void pid;
  return outcome.exitCode;
}
export const code: ErrorCode = ERROR_CODES[0]!;
export const local = new LocalRuntime();
export type Files = RemoteFiles;
`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          types: ['node'],
          skipLibCheck: false,
        },
        files: ['consumer.ts'],
      }),
    );
    expect(await typeCheck()).toBe('');
    // The check can fail: a consumer that misuses the SDK is refused.
    writeFileSync(join(project, 'consumer.ts'), `import { connect } from '@execworld/sdk';\nexport const wrong: number = connect;\n`);
    expect(await typeCheck()).toMatch(/consumer\.ts.*TS2322/);
  }, 120_000);
});
