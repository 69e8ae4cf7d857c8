/**
 * The containments each platform family can give, and how `auto` chooses
 * among them. Which family applies is the platform strategy's to say
 * (`../platform/`): it calls one of these.
 * @module
 */
import { hostCgroupContainment } from './cgroup.ts';
import { NO_CONTAINMENT, type Containment, type ContainmentMode } from './containment.ts';
import { hostSubreaperContainment } from './subreaper.ts';
import { JobObjectContainment } from './job-object.ts';
import { loadKernel32 } from '../win32/kernel32.ts';
import { WindowsProcesses } from '../win32/processes.ts';

export type { Containment, ContainmentMode, ContainmentRecovery, SessionCell } from './containment.ts';
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
}

/**
 * Linux's containment for `choice`: `auto` takes a cgroup where one can be
 * made, else the subreaper when `subreaperFallback`, else none.
 * @throws when an explicit `cgroup` or `subreaper` is not possible here, or for `job`.
 */
export function linuxContainment(choice: ContainmentChoice, options: SelectOptions = {}): ContainmentSelection {
  const subreaper = (): Containment => hostSubreaperContainment(options.claimOrphans === true ? { claimOrphans: true } : {});
  switch (choice) {
    case 'none':
      return { containment: NO_CONTAINMENT };
    case 'cgroup':
      return { containment: hostCgroupContainment() };
    case 'subreaper':
      return { containment: subreaper() };
    case 'job':
      throw new Error('job containment is Windows only, not linux');
    case 'auto': {
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

/**
 * Windows' containment for `choice`: a Job Object per session, which `auto`
 * takes where this host has Job Objects (`hostJobs`), else none.
 * @throws for an explicit `cgroup` or `subreaper`, and for `job` where kernel32 cannot be loaded.
 */
export function windowsContainment(choice: ContainmentChoice, hostJobs: boolean): ContainmentSelection {
  switch (choice) {
    case 'job':
      return { containment: hostJobContainment() };
    case 'auto':
      if (!hostJobs) return { containment: NO_CONTAINMENT, cgroupUnavailable: 'not Linux (win32)' };
      try {
        return { containment: hostJobContainment() };
      } catch (error) {
        return { containment: NO_CONTAINMENT, cgroupUnavailable: `no Job Objects: ${(error as Error).message}` };
      }
    default:
      return uncontained(choice, 'win32');
  }
}

/**
 * The containment of a platform that has none of its own (macOS, the BSDs):
 * `auto` and `none` give none.
 * @throws for an explicit `cgroup`, `subreaper` or `job`.
 */
export function uncontained(choice: ContainmentChoice, platform: NodeJS.Platform): ContainmentSelection {
  switch (choice) {
    case 'none':
      return { containment: NO_CONTAINMENT };
    case 'auto':
      return { containment: NO_CONTAINMENT, cgroupUnavailable: `not Linux (${platform})` };
    case 'job':
      throw new Error(`job containment is Windows only, not ${platform}`);
    default:
      throw new Error(`${choice} containment is Linux only, not ${platform}`);
  }
}
