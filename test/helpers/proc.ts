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

/** A number no other test uses, to find processes by argv: `sleep <marker>` runs 300 s. */
export function uniqueSleepMarker(): string {
  return `300.${String(process.pid).padStart(7, '0')}${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`;
}

/** Live (not zombie) pids with `marker` as one of their arguments. */
export function markerPids(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // A zombie's cmdline is empty, so only processes that still run can match.
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0');
      if (argv.includes(marker)) pids.push(Number(entry));
    } catch (_error) {
      // Gone while reading.
    }
  }
  return pids;
}

/** SIGKILLs whatever still runs with `marker`, so a failing test leaves nothing behind. */
export function killMarked(marker: string): void {
  for (const pid of markerPids(marker)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (_error) {
      // Already gone.
    }
  }
}
