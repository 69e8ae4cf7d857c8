/**
 * Chooses the containment of a runtime. The only place the strategies are
 * picked.
 * @module
 */
import { hostCgroupContainment } from './cgroup.ts';
import { NO_CONTAINMENT, type Containment, type ContainmentMode } from './containment.ts';
import { hostSubreaperContainment } from './subreaper.ts';
import { JobObjectContainment } from './job-object.ts';
import { loadKernel32 } from '../win32/kernel32.ts';
import { WindowsProcesses } from '../win32/processes.ts';

export type { Containment, ContainmentMode, SessionCell } from './containment.ts';
export { NO_CONTAINMENT } from './containment.ts';
export { JobObjectContainment } from './job-object.ts';

/** Job Objects through the host's kernel32. @throws where kernel32 cannot be loaded (not Windows). */
function hostJobContainment(): Containment {
  const kernel32 = loadKernel32();
  return new JobObjectContainment(kernel32, new WindowsProcesses(kernel32));
}

/** What a runtime asks for: a mode, or `auto` for the best one this host allows. */
export type ContainmentChoice = 'auto' | ContainmentMode;

export interface ContainmentSelection {
  readonly containment: Containment;
  /** Why `auto` did not get a cgroup, when it did not. */
  readonly cgroupUnavailable?: string;
}

export interface SelectOptions {
  /**
   * Whether `auto` falls back to the subreaper where no cgroup can be made.
   * Being a subreaper changes the fate of every orphan of the host process,
   * not only the sessions', so a host opts in. @default false
   */
  readonly subreaperFallback?: boolean;
  /** See SubreaperContainmentOptions.claimOrphans. @default false */
  readonly claimOrphans?: boolean;
  /** @default process.platform */
  readonly platform?: NodeJS.Platform;
}

/**
 * The containment for `choice`. `auto` takes a cgroup where one can be made,
 * else the subreaper when `subreaperFallback`, else none; on Windows a Job
 * Object per session.
 * @throws when an explicit `cgroup` or `subreaper` is not possible here.
 */
export function selectContainment(choice: ContainmentChoice, options: SelectOptions = {}): ContainmentSelection {
  const platform = options.platform ?? process.platform;
  const subreaper = (): Containment => hostSubreaperContainment(options.claimOrphans === true ? { claimOrphans: true } : {});
  switch (choice) {
    case 'none':
      return { containment: NO_CONTAINMENT };
    case 'cgroup':
      if (platform !== 'linux') throw new Error(`cgroup containment is Linux only, not ${platform}`);
      return { containment: hostCgroupContainment() };
    case 'subreaper':
      if (platform !== 'linux') throw new Error(`subreaper containment is Linux only, not ${platform}`);
      return { containment: subreaper() };
    case 'job':
      if (platform !== 'win32') throw new Error(`job containment is Windows only, not ${platform}`);
      return { containment: hostJobContainment() };
    case 'auto': {
      if (platform === 'win32' && process.platform === 'win32') {
        try {
          return { containment: hostJobContainment() };
        } catch (error) {
          return { containment: NO_CONTAINMENT, cgroupUnavailable: `no Job Objects: ${(error as Error).message}` };
        }
      }
      if (platform !== 'linux') return { containment: NO_CONTAINMENT, cgroupUnavailable: `not Linux (${platform})` };
      let reason: string;
      try {
        return { containment: hostCgroupContainment() };
      } catch (error) {
        reason = (error as Error).message;
      }
      if (options.subreaperFallback === true) {
        try {
          return { containment: subreaper(), cgroupUnavailable: reason };
        } catch (_error) {
          // Neither: no containment.
        }
      }
      return { containment: NO_CONTAINMENT, cgroupUnavailable: reason };
    }
  }
}
