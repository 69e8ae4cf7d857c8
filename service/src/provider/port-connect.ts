/**
 * The one way the daemon opens a TCP connection to a port in the world, for a
 * port forward or a preview: to 127.0.0.1:`port`, as the owner's OS user.
 *
 * An owner mapped to an OS user (`principal.runAs`) connects as that user
 * would, never as root: a firewall rule on the socket's owner (iptables
 * `-m owner --uid-owner`), a server that asks the kernel who its peer is
 * (SO_PEERCRED does not apply to TCP, but /proc/net/tcp's uid column and
 * `ss -e` do) see the user's uid. Linux takes a socket's uid (sk_uid) from the
 * fsuid of the thread that calls socket(); Node makes its sockets on its main
 * thread, which is root's, and setfsuid there would switch every file the
 * daemon touches meanwhile. So, as OpenSSH separates privileges, the socket
 * is made by the process that already runs as the user: the user's worker
 * (fs/file-worker.ts, the one process per user that also serves the user's
 * files), which passes the connected descriptor back over its IPC channel;
 * the uid stamped at socket() stays with it.
 *
 * An owner that runs as the daemon's own user connects from the daemon.
 * @module
 */
import { connect, type Socket } from 'node:net';
import type { RunAs } from './run-as.ts';
import { FsFailure } from './fs/fs-error.ts';

/** A connection that could not be made: the errno (ECONNREFUSED, ETIMEDOUT, …) and the system's message. */
export class PortConnectError extends Error {
  override name = 'PortConnectError';
  readonly errno: string;
  readonly port: number;
  constructor(port: number, errno: string, message: string) {
    super(`127.0.0.1:${port}: ${message}`);
    this.port = port;
    this.errno = errno;
  }
}

/**
 * What makes a mapped owner's connections: the workers of the users owners run
 * as (fs/worker-files.ts's UserWorkers, which this module does not import: the
 * workers' calls are typed by provider/api.ts, which re-exports this module).
 */
export interface ConnectingWorkers {
  /** The worker of `user`; undefined when `user` is this process's own. */
  of(user: RunAs): { call(method: 'connect', port: number): Promise<Socket> } | undefined;
}

/** Connects to 127.0.0.1:`port` in the world as `runAs` (the daemon's own user when undefined). */
export type PortConnect = (runAs: RunAs | undefined, port: number) => Promise<Socket>;

/**
 * The connections of a daemon: as its own user from here, and as a mapped
 * owner's user through `workers()`, asked at the first such connection (so
 * that a user's files and connections are one process of that user's).
 * The connect it answers resolves with the connected socket, paused: nothing
 * of it was read yet. It throws {@link PortConnectError} when the connection
 * was refused, or the user's worker could not make it.
 */
export function portConnector(workers: () => ConnectingWorkers): PortConnect {
  return async (runAs, port) => {
    if (runAs === undefined || runAs.uid === process.getuid?.()) return await connectHere(port);
    const worker = workers().of(runAs);
    if (worker === undefined) return await connectHere(port);
    try {
      const socket = await worker.call('connect', port);
      socket.pause();
      return socket;
    } catch (error) {
      // The worker's failure to connect carries the errno; a worker that died or could not start is EIO.
      if (error instanceof FsFailure) throw new PortConnectError(port, error.errno ?? 'EIO', error.message);
      throw error;
    }
  };
}

function connectHere(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.pause();
    socket.once('connect', () => {
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => reject(new PortConnectError(port, error.code ?? 'EIO', error.message)));
  });
}
