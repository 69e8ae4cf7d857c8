/**
 * The platform is chosen once, in service/src/provider/platform/ (as
 * node-pty's index.ts chooses its terminal): no other module of the daemon
 * reads `process.platform` or compares a platform name, and no caller asks
 * which containment it was given, since the Containment interface says how
 * its sessions are journaled and recovered. The SDK reads its own host once,
 * in sdk/src/host.ts; what it compares elsewhere is a world's platform as its
 * runtime reports it, named so (`worldPlatform`, `runtime.platform`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SOURCES = [join(ROOT, 'service/src'), join(ROOT, 'sdk/src')];
/** The places that may tell this host's platform apart: the provider's strategy, and the SDK's one reading. */
const CHOSEN_ONCE = [join(ROOT, 'service/src/provider/platform') + sep, join(ROOT, 'sdk/src/host.ts')];

/** Every value of NodeJS.Platform, quoted either way. */
const NAME = String.raw`['"](?:aix|android|cygwin|darwin|freebsd|haiku|linux|netbsd|openbsd|sunos|win32)['"]`;
/** `process.platform` read anywhere, a platform name on either side of (in)equality, or a `case` of one. */
const PLATFORM_COMPARISON = new RegExp(String.raw`process\.platform|[!=]==?\s*${NAME}|${NAME}\s*[!=]==?|\bcase\s+${NAME}\s*:`);
/** A world's platform, as its runtime reported it, compared: not this host's. */
const WORLD_COMPARISON = new RegExp(String.raw`\b(?:worldPlatform|runtime\.platform)\s*[!=]==?\s*${NAME}`, 'g');
/** A caller telling the containments apart by class. */
const CONTAINMENT_CHECK = /instanceof\s+(?:Cgroup|Subreaper|JobObject)Containment\b/;

function sources(): string[] {
  return SOURCES.flatMap((top) =>
    readdirSync(top, { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts'))
      .map((file) => join(top, file)),
  );
}

/** Whether `line` reads this host's platform or compares a platform name, a world's compared left aside. */
function comparesPlatform(line: string): boolean {
  return PLATFORM_COMPARISON.test(line.replace(WORLD_COMPARISON, ''));
}

/** `file:line: text` of every line of `files` that `test` accepts. */
function matches(files: readonly string[], test: (line: string) => boolean): string[] {
  return files.flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, index) => (test(line) ? [`${relative(ROOT, file)}:${index + 1}: ${line.trim()}`] : [])),
  );
}

describe('the platform chosen once', () => {
  it('finds what it looks for', () => {
    const found = ["if (process.platform !== 'linux') return;", "platform === 'win32' ? a : b", "'darwin' === os", "case 'freebsd':", `x = process.platform;`];
    expect(found.map(comparesPlatform)).toEqual([true, true, true, true, true]);
    const passed = ["readonly platform = 'linux' as const;", "platformFor('win32')", "worldPlatform === 'win32' ? a : b", "this.runtime.platform === 'win32'"];
    expect(passed.map(comparesPlatform)).toEqual([false, false, false, false]);
    expect(CONTAINMENT_CHECK.test('containment instanceof CgroupContainment ? a : b')).toBe(true);
  });

  it("no module outside provider/platform/ (and the SDK's host.ts) reads process.platform or compares platform names", () => {
    const elsewhere = sources().filter((file) => !CHOSEN_ONCE.some((place) => file.startsWith(place)));
    expect(matches(elsewhere, comparesPlatform)).toEqual([]);
  });

  it('no module asks which containment it has', () => {
    expect(matches(sources(), (line) => CONTAINMENT_CHECK.test(line))).toEqual([]);
  });
});
