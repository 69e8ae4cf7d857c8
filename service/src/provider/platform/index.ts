/**
 * Chooses the platform strategy, once, from what `host.ts` read of this host:
 * the rest of the provider (and the daemon's composition root) asks its
 * `Platform` and never compares platform names itself.
 * @module
 */
import type { ContainmentChoice, ContainmentSelection, SelectOptions } from '../containment/index.ts';
import { HOST_PLATFORM } from './host.ts';
import type { Platform, PlatformOverrides } from './platform.ts';
import { posixPlatform } from './posix.ts';
import { win32Platform } from './win32.ts';

export type { ManagedTree, Platform, PlatformOverrides, ShellDefaults, TerminalBackend, TreeControl } from './platform.ts';

/** The rules of platform `name`: Windows', or a POSIX platform's. */
export function platformFor(name: NodeJS.Platform, overrides: PlatformOverrides = {}): Platform {
  return name === 'win32' ? win32Platform(overrides) : posixPlatform(name);
}

/** This host's rules, chosen once. */
export const hostPlatform: Platform = platformFor(HOST_PLATFORM);

/**
 * The containment for `choice` on this host, as its platform gives it.
 * @throws when an explicit choice is not possible here.
 */
export function selectContainment(choice: ContainmentChoice, options: SelectOptions = {}): ContainmentSelection {
  return hostPlatform.selectContainment(choice, options);
}
