/**
 * The README's examples run as written: every ```ts block, and the curl block,
 * is run against a real daemon with only its address replaced, must exit 0,
 * and must leave nothing of its own running on the daemon. The token comes
 * from where the README says: ~/.config/execworld/token.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REMOTE_ERROR_CLASSES } from '@execworld/sdk';
import { ERROR_CATALOG, ERROR_CODES } from '@execworld/sdk/protocol';
import { ALICE, startDaemon, type TestDaemon } from '../helpers/daemon.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
/** The address the README's examples name. */
const README_URL = 'http://127.0.0.1:7878';

const blocks = [...README.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((match) => ({ lang: match[1]!, code: match[2]! }));
const tsBlocks = blocks.filter((block) => block.lang === 'ts');
const curlBlocks = blocks.filter((block) => block.lang === 'sh' && block.code.includes('curl'));

let daemon: TestDaemon;
let home: string;
/** Inside the workspace, so that the examples' imports resolve to its packages; under node_modules, so no linter ever sees it. */
let scratch: string;

beforeAll(async () => {
  daemon = await startDaemon();
  home = mkdtempSync(join(tmpdir(), 'execworld-readme-home-'));
  mkdirSync(join(home, '.config', 'execworld'), { recursive: true });
  writeFileSync(join(home, '.config', 'execworld', 'token'), `${ALICE}\n`, { mode: 0o600 });
  scratch = mkdtempSync(join(ROOT, 'node_modules', '.readme-examples-'));
});
afterAll(async () => {
  rmSync(scratch, { recursive: true, force: true });
  await daemon.close();
});

/** The environment of a user whose home is `home`: the README's paths under ~ lead there. */
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

/** Sessions of the README's owner that still run. */
async function running(): Promise<unknown[]> {
  const terminals = (await daemon.request('GET', '/v1/terminals')).body.terminals as { status: string; treeExited: boolean }[];
  const processes = (await daemon.request('GET', '/v1/processes')).body.processes as { status: string; treeExited: boolean }[];
  return [
    ...terminals.filter((terminal) => terminal.status === 'running' || !terminal.treeExited),
    ...processes.filter((process) => process.status === 'running' || !process.treeExited),
  ];
}

describe('README errors', () => {
  it('lists every code of the catalog with its status and SDK class', () => {
    for (const code of ERROR_CODES) {
      const row = new RegExp(`^\\| ${ERROR_CATALOG[code].status} \\| \`${code}\` \\| ${REMOTE_ERROR_CLASSES[code].name} \\|`, 'm');
      expect(README, code).toMatch(row);
    }
  });
});

describe('README examples', () => {
  it('has the examples this test runs', () => {
    expect(tsBlocks.length).toBeGreaterThanOrEqual(3);
    expect(curlBlocks).toHaveLength(1);
    for (const block of tsBlocks.filter((each) => !each.code.includes('LocalRuntime'))) expect(block.code).toContain(README_URL);
  });

  it.each(tsBlocks.map((block, index) => [index + 1, block.code.split('\n')[0], block.code] as const))(
    'ts block %i (%s) runs, exits 0 and leaves nothing running',
    async (index, _first, code) => {
      const file = join(scratch, `example-${index}.mts`);
      writeFileSync(file, code.replaceAll(README_URL, daemon.url));
      const result = await run(join(ROOT, 'node_modules', '.bin', 'tsx'), [file]);
      expect(result.code, result.out).toBe(0);
      if (code.includes("write('echo hi\\r')")) expect(result.out).toContain('hi');
      expect(await running()).toEqual([]);
      // Each example starts tsx, which compiles it first: slow on a loaded machine.
    },
    120_000,
  );

  it('runs the curl block, which exits 0, answers each call and leaves nothing running', async () => {
    const { host } = new URL(daemon.url);
    const script = curlBlocks[0]!.code.replaceAll('localhost:7878', host);
    const file = join(scratch, 'curl.sh');
    writeFileSync(file, `set -e\n${script}`);
    const result = await run('/bin/sh', [file]);
    expect(result.code, result.out).toBe(0);
    expect(result.out).toContain('"status":"ok"');
    expect(result.out).toContain('"applied":true');
    expect(result.out).toMatch(/"foreground":\{"processGroupId":\d+/);
    expect(result.out).toMatch(/"status":"exited".*"treeExited":true/);
    expect(await running()).toEqual([]);
  });
});
