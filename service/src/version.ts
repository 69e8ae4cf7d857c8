/**
 * The service package's version, read once from its manifest. The one place
 * that knows where the manifest is, so that a bundle of the daemon (the
 * Windows lane's) can put the version in its stead.
 * @module
 */
import { readFileSync } from 'node:fs';

/** The version in `service/package.json`. */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
