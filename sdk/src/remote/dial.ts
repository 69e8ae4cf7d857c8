/**
 * One attempt to open the WebSocket to a daemon, and what a refused upgrade
 * means: the daemon's own error when its answer carries one.
 * @module
 */
import { WebSocket } from 'ws';
import { WS_SUBPROTOCOL } from '../protocol/frames.ts';
import { ConnectionError, remoteError, type ExecworldError } from '../errors.ts';
import { describeUnreachable, type CertificateAuthority } from './reach.ts';

export interface DialOptions {
  readonly url: string;
  /** The upgrade's headers: the token where it travels, and the caller's own. */
  readonly headers: Readonly<Record<string, string>>;
  readonly connectTimeoutMs: number;
  readonly ca?: CertificateAuthority | undefined;
}

/**
 * The largest message taken from the daemon. Its messages are far smaller (a
 * data frame holds at most 64 KiB, an output read at most 4 MiB as base64, a
 * list a few hundred sessions); this only bounds what a broken peer can make
 * the client buffer. Not the daemon's maxFrameBytes, which bounds the other
 * direction: what the daemon takes from a client.
 */
const MAX_DAEMON_MESSAGE_BYTES = 256 * 1024 * 1024;

/** The most of a refused upgrade's answer that is read: an error body is small. */
const MAX_REFUSAL_BYTES = 64 * 1024;

/** The error for an upgrade the daemon answered with `status` and `body` instead of switching protocols. */
function upgradeRefusal(status: number, body: string): ExecworldError {
  let parsed: { error?: { code?: unknown; message?: unknown; errno?: unknown } } | undefined;
  try {
    parsed = JSON.parse(body) as typeof parsed;
  } catch (_error) {
    // Not a daemon's answer: a proxy's page, say.
  }
  const error = parsed?.error;
  if (typeof error?.code === 'string' && typeof error.message === 'string') {
    return remoteError({ code: error.code, message: error.message, errno: typeof error.errno === 'string' ? error.errno : undefined }, status);
  }
  if (status === 401) return remoteError({ code: 'UNAUTHORIZED', message: 'the daemon refused the token' }, status);
  return new ConnectionError('CONNECTION_FAILED', `the daemon answered the upgrade with ${status}`);
}

const wsUrl = (url: string): string => `${url.replace(/^http/, 'ws').replace(/\/+$/, '')}/v1/connect`;

/** One connection attempt: resolves with the open socket, or rejects with why the daemon could not be reached or refused. */
export function dial(options: DialOptions): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl(options.url), [WS_SUBPROTOCOL], {
      headers: { ...options.headers },
      handshakeTimeout: options.connectTimeoutMs,
      maxPayload: MAX_DAEMON_MESSAGE_BYTES,
      ...(options.ca === undefined ? {} : { ca: options.ca as string | Buffer | (string | Buffer)[] }),
    });
    const fail = (error: Error): void => {
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.terminate();
      reject(error);
    };
    socket.once('open', () => {
      socket.removeAllListeners();
      resolve(socket);
    });
    socket.once('unexpected-response', (request, response) => {
      // The body names the refusal; closing the request first would drop it unread.
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_REFUSAL_BYTES) chunks.push(chunk);
      });
      response.once('end', () => {
        request.destroy();
        fail(upgradeRefusal(response.statusCode ?? 0, Buffer.concat(chunks).toString('utf8')));
      });
      response.once('error', (error) => {
        request.destroy();
        fail(
          new ConnectionError('CONNECTION_FAILED', `the daemon answered the upgrade with ${response.statusCode ?? 0} and broke off: ${error.message}`, {
            cause: error,
          }),
        );
      });
    });
    socket.once('error', (error) => fail(new ConnectionError('CONNECTION_FAILED', describeUnreachable(options.url, error), { cause: error })));
  });
}
