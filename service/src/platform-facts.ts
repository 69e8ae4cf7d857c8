/**
 * Facts about the host's operating system that the daemon needs outside the
 * local provider, with no dependency on the provider. The provider's own
 * per-platform rules are its platform strategy (`provider/platform/`).
 * @module
 */

/** Whether a file's POSIX mode bits tell who else may read it: everywhere but Windows. */
export function fileModesGuardPrivacy(platform: NodeJS.Platform = process.platform): boolean {
  return platform !== 'win32';
}
