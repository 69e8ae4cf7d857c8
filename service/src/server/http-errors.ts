/**
 * Errors that happen around the routes rather than in them — a request Node's
 * parser refused, a URL the router cannot take, a WebSocket handshake `ws`
 * refused, an error fastify raised itself — answered in the catalog's shape
 * like every other error.
 * @module
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, toServiceError } from './errors.ts';

/** A complete HTTP/1.1 answer carrying `error`, for a socket no fastify reply exists for; the connection closes after it. */
export function rawErrorResponse(error: ServiceError, headers: Readonly<Record<string, string>> = {}): string {
  const body = JSON.stringify({ error: error.body() });
  const lines = [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** The catalog's name for a request Node's HTTP parser or its timers refused. */
export function clientError(error: Error & { code?: string; reason?: string }): ServiceError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      // llhttp counts the request line with the headers and does not say which part overflowed.
      return new ServiceError('HEADERS_TOO_LARGE', 'the request line and headers together are larger than 16 KiB', { cause: error });
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      // Node times only the headers (its request timeout is off); bodies are timed by body-timeouts.ts.
      return new ServiceError('CLIENT_TIMEOUT', 'the request headers did not arrive in time', { cause: error });
    default:
      return new ServiceError('INVALID_ARGUMENT', `the request is not valid HTTP: ${error.reason ?? error.message} (${error.code ?? 'unknown'})`, {
        cause: error,
      });
  }
}

/**
 * Closes a connection whose request is given up, first answering `error`
 * when there is one (none when an answer to the request is already under
 * way: a second status line would corrupt it). The connection is not read
 * on: what the client still sends is never taken.
 */
export function hangUp(socket: Duplex, error: ServiceError | undefined): void {
  if (socket.destroyed) return;
  if (error !== undefined && socket.writable) socket.write(rawErrorResponse(error));
  socket.destroy();
}

/**
 * fastify's `clientErrorHandler`: answers what Node's parser refused (431 for
 * headers past 16 KiB, 400 for a bad Content-Length or request line, 408 for
 * headers that never finished) in the catalog's shape, then closes.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  // A reset connection has nobody to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // Bytes of an answer already under way must not be followed by a second status line (Node's own rule).
  const underway = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  hangUp(socket, underway ? undefined : clientError(error));
}

/**
 * fastify's `frameworkErrors`: a URL with broken percent-encoding, or a path
 * segment over the router's 100 characters, never reaches a route or the auth
 * hook; it is answered here.
 */
export function answerFrameworkError(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  let answer: ServiceError;
  if (error.code === 'FST_ERR_BAD_URL')
    answer = new ServiceError('INVALID_ARGUMENT', 'the URL is not valid: a percent-encoded byte is malformed', { cause: error });
  else if (error.code === 'FST_ERR_MAX_PARAM_LENGTH')
    answer = new ServiceError('URI_TOO_LONG', 'a path segment is longer than 100 characters', { cause: error });
  else answer = toServiceError(error);
  void reply.code(answer.status).send({ error: answer.body() });
}

/**
 * An error fastify raised while taking a request apart, in the catalog's
 * terms; undefined for anything that is not fastify's.
 * @param bodyLimit - the most the request's route takes
 */
export function fastifyError(error: unknown, bodyLimit: number): ServiceError | undefined {
  const { code, statusCode, message } = error as { code?: unknown; statusCode?: unknown; message?: unknown };
  if (typeof code !== 'string' || !code.startsWith('FST_ERR')) return undefined;
  const text = typeof message === 'string' ? message : code;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new ServiceError('PAYLOAD_TOO_LARGE', `the request body is larger than ${bodyLimit} bytes, the most this call takes`, { cause: error });
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new ServiceError('UNSUPPORTED_MEDIA_TYPE', 'send the request body as application/json', { cause: error });
  // Every other client fault fastify names (a body shorter than its Content-Length, say) is a bad request.
  if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) return new ServiceError('INVALID_ARGUMENT', text, { cause: error });
  return undefined;
}
