/**
 * The examples of the README, CONTRIBUTING and every page of docs/ run as
 * written: every ```ts block, and every ```sh block that calls curl, is run
 * against a real daemon with only its address replaced, must exit 0, and must
 * leave nothing of its own running on the daemon. The token comes from where
 * the pages say: ~/.config/execworld/token. A block not meant to run takes
 * another fence (```bash, ```console, ```text).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { codeBlocks, docFiles, readDoc, ROOT } from '../helpers/docs.ts';

/** The address the examples name. */
const DOCS_URL = 'http://127.0.0.1:7878';

const FILES = docFiles();
const blocks = FILES.flatMap((file) => codeBlocks(file));
const tsBlocks = blocks.filter((block) => block.lang === 'ts');
const curlBlocks = blocks.filter((block) => block.lang === 'sh' && block.code.includes('curl'));

let daemon: TestDaemon;
let home: string;
/** Inside the workspace, so that the examples' imports resolve to its packages; under node_modules, so no linter ever sees it. */
let scratch: string;

const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  home = mkdtempSync(join(tmpdir(), 'execworld-readme-home-'));
  mkdirSync(join(home, '.config', 'execworld'), { recursive: true });
  writeFileSync(join(home, '.config', 'execworld', 'token'), `${ALICE}\n`, { mode: 0o600 });
  scratch = mkdtempSync(join(ROOT, 'node_modules', '.readme-examples-'));
});
test.afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** The environment of a user whose home is `home`: the pages' paths under ~ lead there. */
function userEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
  delete env.XDG_CONFIG_HOME;
  return env;
}

async function run(file: string, args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(file, args, { cwd: ROOT, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, out };
}

/** Sessions of the examples' owner that still run. */
async function running(): Promise<unknown[]> {
  const terminals = (await daemon.request('GET', '/v1/terminals')).body.terminals as { status: string; treeExited: boolean }[];
  const processes = (await daemon.request('GET', '/v1/processes')).body.processes as { status: string; treeExited: boolean }[];
  return [
    ...terminals.filter((terminal) => terminal.status === 'running' || !terminal.treeExited),
    ...processes.filter((process) => process.status === 'running' || !process.treeExited),
  ];
}

describe('the pages this test reads', () => {
  test('are the README, CONTRIBUTING and every page of docs/, listed from the directory', () => {
    expect(FILES.slice(0, 2)).toEqual(['README.md', 'CONTRIBUTING.md']);
    for (const page of ['docs/api.md', 'docs/cli.md', 'docs/files.md', 'docs/sdk.md', 'docs/shells.md', 'docs/platforms.md']) expect(FILES).toContain(page);
  });

  test('hold the examples this test runs', () => {
    const where = (list: typeof blocks) => new Set(list.map((block) => block.file));
    // The README's tour has an SDK and a REST example; the reference pages have theirs.
    expect(where(tsBlocks)).toContain('README.md');
    expect(where(curlBlocks)).toContain('README.md');
    expect(where(curlBlocks)).toContain('docs/api.md');
    for (const page of ['docs/sdk.md', 'docs/shells.md', 'docs/files.md']) expect(where(tsBlocks)).toContain(page);
    // Examples of the local runtime and of the protocol client over an in-memory channel pair reach no daemon.
    for (const block of tsBlocks.filter((each) => !each.code.includes('LocalRuntime') && !each.code.includes('MemoryChannel')))
      expect(block.code, `${block.file}:${block.line}`).toContain(DOCS_URL);
  });
});

describe('examples', () => {
  test.each(
    tsBlocks.map((block) => [`${block.file}:${block.line}`, block.code.split('\n').find((line) => line.includes('@execworld')) ?? '', block.code] as const),
  )(
    'the ts block at %s (%s) runs, exits 0 and leaves nothing running',
    async (where, _first, code) => {
      const file = join(scratch, `example-${where.replaceAll(/[/:.]/g, '-')}.mts`);
      writeFileSync(file, code.replaceAll(DOCS_URL, daemon.url));
      const result = await run(join(ROOT, 'node_modules', '.bin', 'tsx'), [file]);
      expect(result.code, result.out).toBe(0);
      // The command's own line of output, not only the line typed: the example waits for bash to run it.
      if (code.includes("write('echo hi\\r')")) expect(result.out).toMatch(/^hi\r?$/m);
      if (code.includes('echo "$GREETING from $PWD"')) expect(result.out).toContain("output: 'hi from /\\n'");
      expect(await running()).toEqual([]);
      // Each example starts tsx, which compiles it first: slow on a loaded machine.
    },
    120_000,
  );

  test.each(curlBlocks.map((block) => [`${block.file}:${block.line}`, block.code] as const))(
    'the curl block at %s exits 0, answers each call without an error and leaves nothing running',
    async (where, code) => {
      const { host } = new URL(daemon.url);
      const script = code.replaceAll('localhost:7878', host).replaceAll('127.0.0.1:7878', host);
      const file = join(scratch, `curl-${where.replaceAll(/[/:.]/g, '-')}.sh`);
      writeFileSync(file, `set -e\n${script}`);
      const result = await run('/bin/sh', [file]);
      expect(result.code, result.out).toBe(0);
      expect(result.out).not.toContain('"error":{');
      // What each call the block makes must have answered.
      if (code.includes('/v1/health')) expect(result.out).toContain('"status":"ok"');
      if (code.includes('/input')) expect(result.out).toContain('"applied":true');
      if (code.includes('/foreground')) expect(result.out).toMatch(/"foreground":\{"processGroupId":\d+/);
      if (code.includes('/terminate')) expect(result.out).toMatch(/"status":"exited".*"treeExited":true/);
      if (code.includes('/done')) expect(result.out).toMatch(/"settled":true,"exit":\{"exitCode":\d+/);
      if (code.includes('/collected/')) expect(result.out).toMatch(/"text":"/);
      expect(await running()).toEqual([]);
    },
    120_000,
  );
});

describe('the README', () => {
  const readme = readDoc('README.md');

  test('is a front door: about 250 lines, its contents first, each of its sections listed there', () => {
    const lines = readme.split('\n').length;
    console.log(`README.md: ${lines} lines`);
    expect(lines).toBeLessThanOrEqual(300);
    const contents = /^## Contents\n\n((?:- .*\n)+)/m.exec(readme);
    expect(contents, 'a ## Contents list').not.toBeNull();
    expect(readme.indexOf('## Contents')).toBeLessThan(readme.indexOf('\n## ', readme.indexOf('## Contents') + 1));
    const sections = [...readme.matchAll(/^## (.+)$/gm)].map((match) => match[1]!).filter((title) => title !== 'Contents');
    for (const title of sections) expect(contents![1], title).toContain(`[${title}](#`);
  });

  test('links every page of docs/', () => {
    for (const page of FILES.filter((file) => file.startsWith('docs/'))) expect(readme).toContain(`](${page})`);
  });

  test('keeps the two set-up commands: one starts the daemon, one runs the tests', () => {
    expect(readme).toContain('npm ci && npm start      # installs, then runs the daemon on 127.0.0.1:7878\n');
    expect(readme).toContain('npm ci && npm test       # installs, then runs lint, type-check and the main suite\n');
    const scripts = (JSON.parse(readDoc('package.json')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.start).toBe('exec execworld serve');
    expect(scripts.test).toBe('npm run lint && npm run typecheck && npm run test:unit');
  });
});
