/**
 * The POSIX tree control. The top-level process leads its own process group
 * (spawned detached), so the tree is that group: signals go to `-pid`, and
 * the tree is gone when no member is left. With a containment cell (a
 * cgroup, or the subreaper's tracking) the tree is the cell: what left the
 * group (setsid, job control) is signalled too, SIGKILL kills the cell
 * whole, and the tree is gone only once the cell is empty.
 * @module
 */
import type { ManagedTree, TreeControl } from '../platform/platform.ts';

export interface ProcessGroupTreeOptions {
  /**
   * Whether the process table is asked about a group whose leader is gone,
   * where `kill(-pgid, 0)` still succeeds for a group of zombies. Only where
   * the table tells zombies apart cheaply.
   */
  readonly scanGroups: boolean;
}

/** A tree control over process groups, and over the containment cell when there is one. */
export function processGroupTree(options: ProcessGroupTreeOptions): TreeControl {
  /** Whether the tree's process group still has a live member. */
  const groupAlive = (tree: ManagedTree): boolean => {
    if (tree.pid <= 0) return false;
    try {
      process.kill(-tree.pid, 0);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ESRCH') return false;
      if (code === 'EPERM') return true;
      return !tree.rootExited();
    }
    // Only after the leader is gone is a table scan worth it: a group of zombies is gone.
    return !(tree.rootExited() && options.scanGroups && tree.groupHasLiveMembers(tree.pid) === false);
  };

  return {
    detached: true,
    takesCells: true,

    signal(tree, signal) {
      const cell = tree.cell;
      // With a cell the group may be long gone while escapees run: its id is signalled only while it is the tree's.
      const group = cell === undefined || groupAlive(tree);
      if (group) {
        try {
          process.kill(-tree.pid, signal);
        } catch (_groupFailure) {
          try {
            tree.child?.kill(signal);
          } catch (_childFailure) {
            // Nothing left to signal.
          }
        }
      }
      if (cell === undefined) return;
      if (signal === 'SIGKILL') {
        cell.kill();
        return;
      }
      // Members that left the group get the same chance to end cleanly; those in it already
      // have their signal, and a second would run a handler twice. (A pid read from the cell
      // could only name another process if it died and its number came round again between
      // the read and the signal.)
      const groups = group ? tree.processGroups() : undefined;
      for (const pid of cell.pids()) {
        if (groups?.get(pid) === tree.pid) continue;
        try {
          process.kill(pid, signal);
        } catch (_error) {
          // Gone meanwhile.
        }
      }
    },

    alive(tree) {
      // The cell holds everything the process started, whatever group or session it is in now.
      if (tree.cell !== undefined) return !tree.cell.isEmpty();
      return groupAlive(tree);
    },
  };
}
