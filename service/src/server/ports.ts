/**
 * Discovery: the TCP ports an owner's running sessions listen on. Each
 * session names its live processes (its cell's, or its tree's), and the
 * provider reads once which of them hold a listening socket, so one answer
 * reads the socket tables once and the descriptors of the owner's processes
 * only (bounded: see provider/inspect/listening.ts).
 * @module
 */
import type { OperationResult } from '@execworld/sdk/protocol';
import type { SessionRegistry } from './sessions/registry.ts';

export function listeningPorts(registry: SessionRegistry, owner: string): OperationResult<'ports.list'> {
  const read = registry.runtime.listeningSockets?.bind(registry.runtime);
  const sessionOf = new Map<number, { session: string; kind: 'terminal' | 'process' }>();
  for (const session of [...registry.list(owner, 'terminal'), ...registry.list(owner, 'process')]) {
    if (session.finishedAt !== undefined) continue;
    for (const pid of session.handle.members?.() ?? []) sessionOf.set(pid, { session: session.id, kind: session.kind });
  }
  const sockets = read?.([...sessionOf.keys()]);
  if (sockets === undefined) return { supported: false, ports: [] };
  return { supported: true, ports: sockets.map((socket) => ({ port: socket.port, address: socket.address, pid: socket.pid, ...sessionOf.get(socket.pid)! })) };
}
