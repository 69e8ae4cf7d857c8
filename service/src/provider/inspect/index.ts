/**
 * Chooses the process inspector for a platform. The only platform switch of
 * the inspectors.
 * @module
 */
import { DarwinInspector } from './darwin.ts';
import { InspectionUnsupportedError, type ProcessInspector } from './inspector.ts';
import { LinuxInspector } from './linux.ts';
import { Win32Inspector } from './win32.ts';

/**
 * @throws {InspectionUnsupportedError} for a platform other than linux, darwin or win32.
 */
export function createInspector(platform: NodeJS.Platform = process.platform): ProcessInspector {
  switch (platform) {
    case 'linux':
      return new LinuxInspector();
    case 'darwin':
      return new DarwinInspector();
    case 'win32':
      return new Win32Inspector();
    default:
      throw new InspectionUnsupportedError(`terminal inspection is unsupported on platform ${platform}`);
  }
}
