/** Facts of this host's process table, read from /proc, for tests and benchmarks. */
import { readdirSync, readFileSync } from 'node:fs';

/** Live (not zombie) pids whose POSIX session is `sid`. */
export function sessionPids(sid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[3]) === sid && fields[0] !== 'Z') pids.push(Number(entry));
    } catch (_error) {
      // Gone while reading.
    }
  }
  return pids;
}

/** Live (not zombie) descendants of `root`, found through each process's parent, and `root` itself if it lives. */
export function treePids(root: number): number[] {
  const children = new Map<number, number[]>();
  const live = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      live.add(Number(entry));
      const parent = Number(fields[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch (_error) {
      // Gone while reading.
    }
  }
  const tree: number[] = [];
  const visit = (pid: number): void => {
    if (live.has(pid)) tree.push(pid);
    for (const child of children.get(pid) ?? []) visit(child);
  };
  visit(root);
  return tree;
}
