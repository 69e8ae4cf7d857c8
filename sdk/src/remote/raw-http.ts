/**
 * The daemon's byte routes over plain HTTP (a file's content streamed, with
 * TCP's own flow control), beside the WebSocket that carries every other call.
 * An error answer is the catalog's JSON, turned into the same errors a call
 * rejects with.
 * @module
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { remoteError } from '../errors.ts';
import type { CertificateAuthority } from './reach.ts';

/** The largest error answer read; the real ones are a few hundred bytes. */
const MAX_ERROR_BYTES = 64 * 1024;
/** The largest JSON answer of a byte route read. */
const MAX_JSON_BYTES = 1024 * 1024;
/**
 * HTTP requests one runtime has in flight at once; the rest wait their turn
 * here. Well within the daemon's bound on an owner's requests
 * (--max-requests, 256 by default), which refuses the ones past it.
 */
export const MAX_HTTP_REQUESTS = 64;

export interface RawHttpOptions {
  readonly url: string;
  /** Every request's headers: the token where it travels, and the caller's own. */
  readonly headers: Readonly<Record<string, string>>;
  readonly ca: CertificateAuthority | undefined;
}

/** HTTP requests to one daemon over kept-alive connections. */
export class RawHttp {
  readonly #options: RawHttpOptions;
  readonly #agent: HttpAgent;

  constructor(options: RawHttpOptions) {
    this.#options = options;
    const secure = options.url.startsWith('https:');
    this.#agent = secure
      ? new HttpsAgent({
          keepAlive: true,
          maxSockets: MAX_HTTP_REQUESTS,
          ...(options.ca === undefined ? {} : { ca: options.ca as string | Buffer | (string | Buffer)[] }),
        })
      : new HttpAgent({ keepAlive: true, maxSockets: MAX_HTTP_REQUESTS });
  }

  /**
   * GETs `path` with `query`; resolves with the response once its status is
   * a success, rejects with the daemon's error otherwise. Aborting `signal`
   * destroys the request (and the response being read) with an AbortError.
   */
  get(path: string, query: Readonly<Record<string, string | number | undefined>>, signal?: AbortSignal): Promise<IncomingMessage> {
    return this.send('GET', path, query, { signal });
  }

  /**
   * Sends `method` to `path` with `query` and, when given, `body` streamed as
   * `contentType`; resolves with the response once its status is a success,
   * rejects with the daemon's error otherwise (or the transport's, for a cut).
   */
  send(
    method: 'GET' | 'PUT',
    path: string,
    query: Readonly<Record<string, string | number | undefined>>,
    options: { body?: Readable | undefined; contentType?: string | undefined; signal?: AbortSignal | undefined } = {},
  ): Promise<IncomingMessage> {
    const { body, signal } = options;
    const url = new URL(path, this.#options.url.replace(/\/*$/, '/'));
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value));
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const request = send(url, {
        method,
        agent: this.#agent,
        headers: {
          ...this.#options.headers,
          ...(body === undefined ? {} : { 'content-type': options.contentType ?? 'application/octet-stream' }),
        },
        ...(signal === undefined ? {} : { signal }),
      });
      request.once('error', reject);
      request.once('response', (response) => {
        const status = response.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          resolve(response);
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= MAX_ERROR_BYTES) chunks.push(chunk);
        });
        response.once('error', reject);
        response.once('end', () => {
          let body: { error?: { code: string; message: string; errno?: string } } | undefined;
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
          } catch (_error) {
            body = undefined;
          }
          reject(remoteError(body?.error ?? { code: 'INTERNAL', message: `the daemon answered ${status} without an error body` }, status));
        });
      });
      if (body === undefined) request.end();
      else {
        // A body that fails (a local read error) ends the request; the failure is the caller's to see.
        body.once('error', (error) => request.destroy(error));
        body.pipe(request);
      }
    });
  }

  /** Sends like {@link send} and reads the answer as JSON (at most `maxBytes`, 1 MiB unless told). */
  async json<T>(
    method: 'GET' | 'PUT',
    path: string,
    query: Readonly<Record<string, string | number | undefined>>,
    options: { body?: Readable | undefined; contentType?: string | undefined; signal?: AbortSignal | undefined; maxBytes?: number } = {},
  ): Promise<T> {
    const limit = options.maxBytes ?? MAX_JSON_BYTES;
    const response = await this.send(method, path, query, options);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) {
        response.destroy();
        throw new Error(`the daemon's answer to ${method} ${path} is larger than ${limit} bytes`);
      }
      chunks.push(chunk);
    }
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as T;
  }

  close(): void {
    this.#agent.destroy();
  }
}
