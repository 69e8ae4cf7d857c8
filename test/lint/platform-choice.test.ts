/**
 * The platform is chosen once, in service/src/provider/platform/ (as
 * node-pty's index.ts chooses its terminal): no other module of the daemon
 * reads `process.platform` or compares a platform name, and no caller asks
 * which containment it was given, since the Containment interface says how
 * its sessions are journaled and recovered.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SOURCES = join(ROOT, 'service/src');
/** The one place that may tell the platforms apart. */
const PLATFORM_DIR = join(SOURCES, 'provider/platform') + sep;

/** Every value of NodeJS.Platform, quoted either way. */
const NAME = String.raw`['"](?:aix|android|cygwin|darwin|freebsd|haiku|linux|netbsd|openbsd|sunos|win32)['"]`;
/** `process.platform` read anywhere, a platform name on either side of (in)equality, or a `case` of one. */
const PLATFORM_COMPARISON = new RegExp(String.raw`process\.platform|[!=]==?\s*${NAME}|${NAME}\s*[!=]==?|\bcase\s+${NAME}\s*:`);
/** A caller telling the containments apart by class. */
const CONTAINMENT_CHECK = /instanceof\s+(?:Cgroup|Subreaper|JobObject)Containment\b/;

function sources(): string[] {
  return readdirSync(SOURCES, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(SOURCES, file));
}

/** `file:line: text` of every line of `files` that `pattern` matches. */
function matches(files: readonly string[], pattern: RegExp): string[] {
  return files.flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, index) => (pattern.test(line) ? [`${relative(ROOT, file)}:${index + 1}: ${line.trim()}`] : [])),
  );
}

describe('the platform chosen once', () => {
  it('finds what it looks for', () => {
    const seen = (line: string): boolean => PLATFORM_COMPARISON.test(line);
    expect(["if (process.platform !== 'linux') return;", "platform === 'win32' ? a : b", "'darwin' === os", "case 'freebsd':"].map(seen)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(["readonly platform = 'linux' as const;", "platformFor('win32')", 'const linux = true;'].map(seen)).toEqual([false, false, false]);
    expect(CONTAINMENT_CHECK.test('containment instanceof CgroupContainment ? a : b')).toBe(true);
  });

  it('no module outside provider/platform/ reads process.platform or compares platform names', () => {
    expect(
      matches(
        sources().filter((file) => !file.startsWith(PLATFORM_DIR)),
        PLATFORM_COMPARISON,
      ),
    ).toEqual([]);
  });

  it('no module asks which containment it has', () => {
    expect(matches(sources(), CONTAINMENT_CHECK)).toEqual([]);
  });
});
