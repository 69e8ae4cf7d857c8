/** Facts of this host's process table, read from /proc, for tests and benchmarks. */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** One process of a session, from its `/proc/<pid>/stat`. */
export interface SessionProcess {
  readonly pid: number;
  /** The command name, as `ps -o comm` shows it. */
  readonly comm: string;
  readonly state: string;
  readonly pgrp: number;
  /** The foreground group of its controlling terminal, -1 without one. */
  readonly tpgid: number;
}

/** Live (not zombie) processes whose POSIX session is `sid`. */
export function sessionProcesses(sid: number): SessionProcess[] {
  const found: SessionProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const close = stat.lastIndexOf(')');
      const fields = stat.slice(close + 2).split(' ');
      if (Number(fields[3]) !== sid || fields[0] === 'Z') continue;
      found.push({ pid: Number(entry), comm: stat.slice(stat.indexOf('(') + 1, close), state: fields[0]!, pgrp: Number(fields[2]), tpgid: Number(fields[5]) });
    } catch (_error) {
      // Gone while reading.
    }
  }
  return found;
}

/** Live (not zombie) pids whose POSIX session is `sid`. */
export function sessionPids(sid: number): number[] {
  return sessionProcesses(sid).map((process) => process.pid);
}

/**
 * True once a process named `comm` is asleep (state S) in the foreground group
 * of session `sid`'s terminal: it started and blocked where it blocks, which a
 * test can wait for instead of guessing how long a start takes.
 */
export function asleepInForeground(sid: number, comm: string): boolean {
  return sessionProcesses(sid).some((process) => process.comm === comm && process.state === 'S' && process.pgrp === process.tpgid);
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

/**
 * Unique `sleep` markers for a test file: `next()` gives a fresh one, and every
 * process still running with one is killed after each test.
 */
export function sleepMarkers(afterEach: (cleanup: () => void) => void): { next(): string } {
  const markers: string[] = [];
  afterEach(() => {
    for (const marker of markers.splice(0)) killMarked(marker);
  });
  return {
    next() {
      const value = uniqueSleepMarker();
      markers.push(value);
      return value;
    },
  };
}

/**
 * `sleep 300`s outside every session, killed after each test: processes
 * nothing of the daemon may signal. `start(as)` runs one as another user;
 * `track(pid)` has another process of the test's killed with them.
 */
export function bystanders(afterEach: (cleanup: () => void) => void): { start(as?: { uid: number; gid: number }): number; track(pid: number): void } {
  const pids: number[] = [];
  afterEach(() => {
    for (const pid of pids.splice(0)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch (_error) {
        // Already gone.
      }
    }
  });
  return {
    start(as) {
      const child = spawn('sleep', ['300'], { stdio: 'ignore', detached: true, ...(as === undefined ? {} : { uid: as.uid, gid: as.gid }) });
      child.unref();
      pids.push(child.pid!);
      return child.pid!;
    },
    track(pid) {
      pids.push(pid);
    },
  };
}

const loopback = (port: number): string => `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * The uid the kernel's TCP table gives the established connection from
 * 127.0.0.1:`localPort` to 127.0.0.1:`remotePort`: the whole pair, as a
 * connection of another test in TIME_WAIT (uid 0) may hold the same local port.
 */
export function socketUid(localPort: number, remotePort: number): number | undefined {
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...; st 01 is ESTABLISHED.
    if (fields[1] === loopback(localPort) && fields[2] === loopback(remotePort) && fields[3] === '01') return Number(fields[7]);
  }
  return undefined;
}
