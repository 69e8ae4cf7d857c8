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
