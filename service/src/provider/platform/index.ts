/**
 * Chooses the platform strategy. The only place the local provider asks which
 * operating system it is on.
 * @module
 */
import type { Platform, PlatformOverrides } from './platform.ts';
import { posixPlatform } from './posix.ts';
import { win32Platform } from './win32.ts';

export type { ManagedTree, Platform, PlatformOverrides, TerminalBackend, TreeControl } from './platform.ts';

/** The rules of platform `name`: Windows', or a POSIX platform's. */
export function platformFor(name: NodeJS.Platform, overrides: PlatformOverrides = {}): Platform {
  return name === 'win32' ? win32Platform(overrides) : posixPlatform(name);
}

/** This host's rules, chosen once. */
export const hostPlatform: Platform = platformFor(process.platform);
