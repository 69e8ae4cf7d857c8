/**
 * A port connector: the process of an OS user that opens that user's TCP
 * connections to ports in the world and hands each one to the daemon over the
 * IPC channel (SCM_RIGHTS), as a socket of its own. Linux stamps a socket
 * with the uid of the process that made it (sk_uid, from the creating
 * thread's fsuid at socket()), and that stamp travels with the descriptor:
 * what the world sees of the connection (`ss -e`, /proc/net/tcp's uid
 * column, an iptables `-m owner --uid-owner` rule) is the user's, never
 * root's, although the daemon then reads and writes it.
 *
 * It loads its code as the daemon's user, then drops to the user's uid and
 * gid with no supplementary groups before it makes any connection (see
 * port-connect.ts, which starts it).
 * @module
 */
import { connect, type Socket } from 'node:net';

/** A request of the daemon: connect to 127.0.0.1:`port`. */
export interface ConnectorRequest {
  readonly id: number;
  readonly port: number;
}

/** The answer: the socket rides along with `ok: true`; a failure says the errno. */
export type ConnectorReply =
  { readonly id: number; readonly ok: true } | { readonly id: number; readonly ok: false; readonly errno: string; readonly message: string };

const [uid, gid] = (process.env.EXECWORLD_CONNECTOR_IDS ?? '').split(':').map(Number);
if (uid === undefined || gid === undefined || !Number.isSafeInteger(uid) || !Number.isSafeInteger(gid) || uid < 0 || gid < 0) {
  process.stderr.write('port connector: EXECWORLD_CONNECTOR_IDS must be <uid>:<gid>\n');
  process.exit(2);
}
// No supplementary groups, then the gid, then the uid: none of it can be undone once the uid is dropped.
process.setgroups!([]);
process.setgid!(gid);
process.setuid!(uid);

process.on('message', (request: ConnectorRequest) => {
  const socket: Socket = connect({ host: '127.0.0.1', port: request.port });
  // Not a byte is read here: a server that speaks first (a banner) is read by the daemon, from the first byte.
  socket.pause();
  socket.once('connect', () => {
    // The descriptor goes to the daemon; this process's copy closes once it is sent.
    process.send!({ id: request.id, ok: true } satisfies ConnectorReply, socket);
  });
  socket.once('error', (error: NodeJS.ErrnoException) => {
    process.send!({ id: request.id, ok: false, errno: error.code ?? 'EIO', message: error.message } satisfies ConnectorReply);
  });
});
// The daemon gone, this process has nobody to serve.
process.on('disconnect', () => process.exit(0));
