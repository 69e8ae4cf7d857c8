/**
 * Which TCP ports a set of processes listens on, from Linux's socket tables:
 * `/proc/net/tcp` and `/proc/net/tcp6` list every socket of the network
 * namespace with its state (`0A` is LISTEN), its local address and its inode;
 * `/proc/PID/fd/*` of a process links to `socket:[INODE]` for each socket it
 * holds. A listening socket is the process's whose descriptor names its inode
 * (a socket passed on to a child is held by both; each holder is named).
 *
 * The tables read are the daemon's network namespace's, which is the
 * sessions' (they are not given another) and the one a preview connects in.
 * @module
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { readKernelText } from '../kernel-text.ts';

/** A TCP socket listening in the world, and a process holding it. */
export interface ListeningSocket {
  readonly port: number;
  /** The local address it listens on: `0.0.0.0` or `::` for every address, `127.0.0.1`, `::1`, … */
  readonly address: string;
  readonly pid: number;
}

/** The state column's value for LISTEN (include/net/tcp_states.h: TCP_LISTEN = 10). */
const LISTEN = '0A';
/**
 * The most descriptors read for one answer: a process may hold many thousands, and the answer's cost must stay
 * bounded whatever the sessions hold. Past it, the processes not yet read are left out.
 */
export const MAX_DESCRIPTORS_READ = 65_536;

/** An address of the tables, in hex of the kernel's byte order (each 32-bit word little-endian on the hosts Node runs on). */
export function tableAddress(hex: string): string {
  const words = hex.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((word) => [6, 4, 2, 0].map((at) => Number.parseInt(word.slice(at, at + 2), 16)));
  if (bytes.length === 4) return bytes.join('.');
  // IPv6: eight groups, shortened as RFC 5952 says (the longest run of zero groups becomes ::).
  const groups = Array.from({ length: 8 }, (_unused, index) => ((bytes[index * 2]! << 8) | bytes[index * 2 + 1]!).toString(16));
  if (groups.slice(0, 5).every((group) => group === '0') && groups[5] === 'ffff') return `::ffff:${bytes.slice(12).join('.')}`;
  let best = { at: -1, length: 0 };
  for (let at = 0; at < 8;) {
    let end = at;
    while (end < 8 && groups[end] === '0') end += 1;
    if (end - at > best.length && end - at > 1) best = { at, length: end - at };
    at = end === at ? at + 1 : end;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.length).join(':')}`;
}

/** The listening sockets of one table's text, by inode. */
export function parseTable(text: string): Map<string, { port: number; address: string }> {
  const sockets = new Map<string, { port: number; address: string }>();
  for (const line of text.split('\n').slice(1)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10 || fields[3] !== LISTEN) continue;
    const [address, port] = fields[1]!.split(':') as [string, string];
    const inode = fields[9]!;
    if (inode === '0') continue;
    sockets.set(inode, { port: Number.parseInt(port, 16), address: tableAddress(address) });
  }
  return sockets;
}

function readTable(path: string): string {
  try {
    return readKernelText(path);
  } catch (_error) {
    // No IPv6 in this kernel: no tcp6 table.
    return '';
  }
}

/**
 * The TCP sockets the processes `pids` listen on, each with the first of them
 * found holding it, ordered by port. A process that is gone, or whose
 * descriptors the daemon may not read, holds nothing.
 */
export function listeningSockets(pids: readonly number[], proc = '/proc'): ListeningSocket[] {
  if (pids.length === 0) return [];
  const listening = new Map([...parseTable(readTable(`${proc}/net/tcp`)), ...parseTable(readTable(`${proc}/net/tcp6`))]);
  const found = new Map<string, ListeningSocket>();
  let read = 0;
  for (const pid of pids) {
    if (listening.size === found.size || read >= MAX_DESCRIPTORS_READ) break;
    let fds: string[];
    try {
      fds = readdirSync(`${proc}/${pid}/fd`);
    } catch (_error) {
      continue;
    }
    for (const fd of fds.slice(0, MAX_DESCRIPTORS_READ - read)) {
      read += 1;
      let target: string;
      try {
        target = readlinkSync(`${proc}/${pid}/fd/${fd}`);
      } catch (_error) {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      const socket = inode === undefined ? undefined : listening.get(inode);
      if (inode !== undefined && socket !== undefined && !found.has(inode)) found.set(inode, { ...socket, pid });
    }
  }
  return [...found.values()].sort((a, b) => a.port - b.port || a.address.localeCompare(b.address));
}
