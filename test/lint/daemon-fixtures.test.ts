/**
 * A test gets its daemon from the fixtures of test/helpers/daemon-test.ts
 * (daemonTest, daemonProcessTest, connectedDaemon), which stop every daemon
 * they started whether the test passed or not: no file outside test/helpers
 * starts one by hand with startInProcessDaemon, startDaemonProcess or
 * serveFrom, but the exceptions below, each with its reason.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const TESTS = join(ROOT, 'test');
/** The helpers that start a daemon; only test/helpers calls them. */
const STARTERS = ['startInProcessDaemon', 'startDaemonProcess', 'serveFrom'] as const;
type Starter = (typeof STARTERS)[number];

/** The files that start a daemon by hand, what they call and why; each says so in a comment at its call. */
const EXCEPTIONS: Record<string, { starter: Starter; reason: string }> = {
  'test/cli/setup.test.ts': { starter: 'serveFrom', reason: 'the daemon as `npm start` runs it, a launcher the fixtures do not start' },
  'test/docker/image.test.ts': { starter: 'serveFrom', reason: "the image's own command (tini, then the daemon) replayed from its stage" },
  'test/package/packages.test.ts': { starter: 'serveFrom', reason: '`npx execworld serve` in a project that installed the packed tarballs' },
};

/** What a file calls or imports of the starters: `name(`, or the name in an import's braces (an alias included). */
function startersIn(text: string): Starter[] {
  const found = new Set<Starter>();
  for (const starter of STARTERS) {
    if (new RegExp(String.raw`\b${starter}\s*\(`).test(text)) found.add(starter);
    if (new RegExp(String.raw`import\s*(?:type\s*)?\{[^}]*\b${starter}\b[^}]*\}\s*from`).test(text)) found.add(starter);
  }
  return [...found];
}

/** The .ts files under test/ but test/helpers and this file, relative to the checkout. */
function testSources(): string[] {
  return readdirSync(TESTS, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => relative(ROOT, join(TESTS, file)))
    .filter((file) => !file.startsWith('test/helpers/') && file !== 'test/lint/daemon-fixtures.test.ts');
}

describe('daemons in tests', () => {
  it('tells a start by hand from the use of a fixture', () => {
    expect(startersIn("import { ALICE, startInProcessDaemon } from '../helpers/daemon.ts';")).toEqual(['startInProcessDaemon']);
    expect(startersIn("import { startDaemonProcess as spawn } from '../helpers/daemon-process.ts';")).toEqual(['startDaemonProcess']);
    expect(startersIn('const daemon = await serveFrom(argv, { env });')).toEqual(['serveFrom']);
    expect(startersIn("const test = daemonProcessTest(['--ring-bytes', '1']);\ntest('x', async ({ spawnDaemon, startDaemon }) => spawnDaemon());")).toEqual([]);
  });

  it('are started only by the fixtures of test/helpers/daemon-test.ts, but in the listed exceptions', () => {
    const files = testSources();
    expect(files.length).toBeGreaterThan(100);
    const byHand = files.flatMap((file) => {
      const starters = startersIn(readFileSync(join(ROOT, file), 'utf8')).filter((starter) => EXCEPTIONS[file]?.starter !== starter);
      return starters.map((starter) => `${file}: ${starter}`);
    });
    expect(byHand).toEqual([]);
  });

  it('lists only exceptions that still start a daemon by hand', () => {
    for (const [file, { starter }] of Object.entries(EXCEPTIONS)) expect(startersIn(readFileSync(join(ROOT, file), 'utf8')), file).toContain(starter);
  });
});
