/**
 * A connection to a port in the world, for the preview proxy and port
 * forwards: to 127.0.0.1, where what a session listens on is reached.
 * @module
 */
import { connect, type Socket } from 'node:net';
import type { RunAs } from './run-as.ts';

/**
 * A TCP connection to `port` on 127.0.0.1, resolved once it is established;
 * rejects with the connect error (ECONNREFUSED when nothing listens there).
 * `runAs` is the owner's OS user the connection is made as.
 */
export function connectToPort(_runAs: RunAs | undefined, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const failed = (error: Error): void => reject(error);
    socket.once('error', failed);
    socket.once('connect', () => {
      socket.removeListener('error', failed);
      resolve(socket);
    });
  });
}
