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
 * is made by a process that already runs as the user (port-connector.ts, one
 * per user, started on first use and kept while the daemon runs), which
 * passes the connected descriptor back over its IPC channel; the uid stamped
 * at socket() stays with it.
 *
 * An owner that runs as the daemon's own user connects from the daemon.
 * @module
 */
import { fork, type ChildProcess } from 'node:child_process';
import { connect, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { RunAs } from './run-as.ts';
import type { ConnectorReply, ConnectorRequest } from './port-connector.ts';

const ENTRY = fileURLToPath(new URL('../../bin/port-connector.js', import.meta.url));

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
 * Connects to 127.0.0.1:`port` in the world as `runAs` (the daemon's own user
 * when undefined).
 * @returns the connected socket, paused: nothing of it was read yet.
 * @throws {PortConnectError} the connection was refused, or the user's connector could not make it.
 */
export function connectToPort(runAs: RunAs | undefined, port: number): Promise<Socket> {
  if (runAs === undefined || runAs.uid === process.getuid?.()) return connectHere(port);
  let connector = connectors.get(runAs.uid);
  if (connector === undefined || !connector.usable) {
    connector = new Connector(runAs);
    connectors.set(runAs.uid, connector);
  }
  return connector.connect(port);
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

/** The connector of each OS user, by uid. */
const connectors = new Map<number, Connector>();

/** One user's connector process and the connections it owes. */
class Connector {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { port: number; resolve(socket: Socket): void; reject(error: Error): void }>();
  #nextId = 1;
  #gone: string | undefined;

  constructor(user: RunAs) {
    this.#child = fork(ENTRY, [], {
      // Nowhere of the daemon's.
      cwd: '/',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', EXECWORLD_CONNECTOR_IDS: `${user.uid}:${user.gid}` },
      execArgv: [],
    });
    // It never holds the daemon up: the daemon's exit ends its channel, and the connector exits with it.
    this.#child.unref();
    this.#child.channel?.unref();
    this.#child.on('message', (reply: ConnectorReply, handle: unknown) => this.#answer(reply, handle));
    const gone = (why: string): void => {
      this.#gone ??= why;
      for (const [id, pending] of this.#pending) {
        this.#pending.delete(id);
        pending.reject(new PortConnectError(pending.port, 'EIO', `the port connector of user ${user.name} ${why}`));
      }
    };
    this.#child.once('error', (error) => gone(`could not run: ${error.message}`));
    this.#child.once('exit', (code, signal) => gone(`exited (${signal ?? code})`));
  }

  get usable(): boolean {
    return this.#gone === undefined && this.#child.connected;
  }

  connect(port: number): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const id = this.#nextId++;
      this.#pending.set(id, { port, resolve, reject });
      // Held only while a connection is owed: an idle connector does not keep the daemon's loop alive.
      this.#child.channel?.ref();
      this.#child.send({ id, port } satisfies ConnectorRequest, (error) => {
        if (error === null || !this.#pending.delete(id)) return;
        reject(new PortConnectError(port, 'EIO', `the port connector could not be asked: ${error.message}`));
      });
    });
  }

  #answer(reply: ConnectorReply, handle: unknown): void {
    const pending = this.#pending.get(reply.id);
    if (pending === undefined) {
      if (handle instanceof Socket) handle.destroy();
      return;
    }
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#child.channel?.unref();
    if (!reply.ok) pending.reject(new PortConnectError(pending.port, reply.errno, reply.message));
    else if (handle instanceof Socket) {
      handle.pause();
      pending.resolve(handle);
    } else pending.reject(new PortConnectError(pending.port, 'EIO', 'the port connector answered without a socket'));
  }
}
