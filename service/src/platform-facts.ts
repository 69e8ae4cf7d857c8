/**
 * Facts about the host's operating system that the daemon needs outside the
 * local provider, as its platform strategy (`provider/platform/`) states them.
 * @module
 */
import { hostPlatform, platformFor } from './provider/platform/index.ts';

/** Whether a file's POSIX mode bits tell who else may read it: everywhere but Windows. */
export function fileModesGuardPrivacy(platform: NodeJS.Platform = hostPlatform.name): boolean {
  return platformFor(platform).fileModesGuardPrivacy;
}
