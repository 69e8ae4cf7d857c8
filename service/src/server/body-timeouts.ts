/**
 * How long a client may take over a request's body (--request-timeout-ms).
 *
 * Node's own request timeout cannot be it. Node checks it only every 30 s
 * (`connectionsCheckingInterval`), and when it is shorter than the headers
 * timeout (60 s) Node swaps the two: a body was cut no sooner than 60 s, a
 * trickling one up to 90 s. And it times the whole request, so it would cut an
 * upload that is slow but arriving all along. The daemon leaves Node only the
 * headers (within the smaller of 60 s and the request timeout) and times
 * bodies itself:
 *
 * - a body it takes whole (a JSON body, or one a route never reads) must have
 *   all arrived within the timeout of its headers;
 * - a body it streams (an upload's bytes, an archive to unpack: see
 *   {@link bodyIsStreamed}) may take as long as it takes, but is cut once no
 *   byte of it has come for the timeout while the daemon waited for one.
 *   Bytes the daemon has not yet taken (its disk is slow, the upload waits
 *   for its turn) are its own delay, not the client's.
 *
 * A cut answers 408 CLIENT_TIMEOUT, unless the request's answer has already
 * begun, and closes the connection.
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ServiceError } from './errors.ts';
import { hangUp } from './http-errors.ts';

/** How often, as a share of the timeout, a streamed body is looked at for progress: it is cut at most this much late. */
const IDLE_CHECKS_PER_TIMEOUT = 8;

interface Watch {
  readonly response: ServerResponse;
  readonly timeoutMs: number;
  timer: NodeJS.Timeout;
  /** The socket's bytes read when the body was last seen to move, and when that was. */
  bytesRead: number;
  movedAt: number;
}

const watches = new WeakMap<IncomingMessage, Watch>();

/** Whether a request has a body still to come: HTTP/1.1 gives one only with Transfer-Encoding or a Content-Length (RFC 9112 §6.3). */
function bodyToCome(request: IncomingMessage): boolean {
  if (request.complete) return false;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Ends the request: 408 if nothing of its answer was sent, then the connection closes. */
function cut(request: IncomingMessage, watch: Watch, message: string): void {
  watches.delete(request);
  hangUp(request.socket, watch.response.headersSent ? undefined : new ServiceError('CLIENT_TIMEOUT', message));
}

/**
 * Starts timing `request`'s body, if it has one still to come: it must all
 * arrive within `timeoutMs`, unless a route streams it ({@link bodyIsStreamed}).
 * Call it as the request arrives, before any route sees it.
 */
export function timeBody(request: IncomingMessage, response: ServerResponse, timeoutMs: number): void {
  if (!bodyToCome(request)) return;
  const watch: Watch = {
    response,
    timeoutMs,
    timer: setTimeout(() => {
      if (!request.complete) cut(request, watch, `the request body did not all arrive within ${timeoutMs} ms of its headers (--request-timeout-ms)`);
    }, timeoutMs),
    bytesRead: request.socket.bytesRead,
    movedAt: performance.now(),
  };
  // A timer is no reason to keep the process alive.
  watch.timer.unref();
  watches.set(request, watch);
  const done = (): void => {
    clearTimeout(watch.timer);
    watches.delete(request);
  };
  // The body was read to its end, or the request is over (answered and drained, or its connection gone).
  request.once('end', done);
  request.once('close', done);
}

/**
 * `request`'s body goes to its route as a stream of any length: from now on
 * it is cut only when no byte of it has come for the timeout (see the module).
 */
export function bodyIsStreamed(request: IncomingMessage): void {
  const watch = watches.get(request);
  if (watch === undefined) return;
  clearTimeout(watch.timer);
  watch.bytesRead = request.socket.bytesRead;
  watch.movedAt = performance.now();
  const every = Math.max(1, Math.ceil(watch.timeoutMs / IDLE_CHECKS_PER_TIMEOUT));
  const check = (): void => {
    if (request.complete || watches.get(request) !== watch) return;
    const now = performance.now();
    const bytesRead = request.socket.bytesRead;
    // Bytes read since the last look, or bytes read and waiting for the daemon to take them: the client is not the one idle.
    if (bytesRead !== watch.bytesRead || request.readableLength > 0) {
      watch.bytesRead = bytesRead;
      watch.movedAt = now;
    } else if (now - watch.movedAt >= watch.timeoutMs) {
      cut(request, watch, `no byte of the request body came for ${watch.timeoutMs} ms (--request-timeout-ms)`);
      return;
    }
    watch.timer.refresh();
  };
  watch.timer = setTimeout(check, every);
  watch.timer.unref();
}
