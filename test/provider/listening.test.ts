/**
 * Reading which ports processes listen on from Linux's socket tables: the
 * addresses as the kernel writes them (32-bit words in its byte order), the
 * LISTEN rows only, and a real socket of this process found by its inode.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { listeningSockets, parseTable, tableAddress } from '../../service/src/provider/inspect/listening.ts';

describe('the socket tables', () => {
  it('reads IPv4 and IPv6 addresses as the kernel writes them', () => {
    expect(tableAddress('0100007F')).toBe('127.0.0.1');
    expect(tableAddress('00000000')).toBe('0.0.0.0');
    expect(tableAddress('00000000000000000000000000000000')).toBe('::');
    expect(tableAddress('00000000000000000000000001000000')).toBe('::1');
    expect(tableAddress('0000000000000000FFFF00000100007F')).toBe('::ffff:127.0.0.1');
    expect(tableAddress('B80D0120000000000000000001000000')).toBe('2001:db8::1');
  });

  it('takes the LISTEN rows only, by inode', () => {
    const table = [
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
      '   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0',
      '   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1',
      '',
    ].join('\n');
    expect([...parseTable(table)]).toEqual([['4242', { port: 8080, address: '127.0.0.1' }]]);
  });

  it.runIf(process.platform === 'linux')("finds a socket this process listens on, and none of another process's", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      expect(listeningSockets([process.pid])).toContainEqual({ port, address: '127.0.0.1', pid: process.pid });
      expect(listeningSockets([1]).filter((socket) => socket.port === port)).toEqual([]);
      expect(listeningSockets([])).toEqual([]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
