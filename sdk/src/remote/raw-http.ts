/**
 * The daemon's byte routes over plain HTTP (a file's content streamed, with
 * TCP's own flow control), beside the WebSocket that carries every other call.
 * An error answer is the catalog's JSON, turned into the same errors a call
 * rejects with.
 * @module
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { remoteError } from '../errors.ts';
import type { CertificateAuthority } from './reach.ts';

/** The largest error answer read; the real ones are a few hundred bytes. */
const MAX_ERROR_BYTES = 64 * 1024;

export interface RawHttpOptions {
  readonly url: string;
  readonly token: string;
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
      ? new HttpsAgent({ keepAlive: true, ...(options.ca === undefined ? {} : { ca: options.ca as string | Buffer | (string | Buffer)[] }) })
      : new HttpAgent({ keepAlive: true });
  }

  /**
   * GETs `path` with `query`; resolves with the response once its status is
   * a success, rejects with the daemon's error otherwise. Aborting `signal`
   * destroys the request (and the response being read) with an AbortError.
   */
  get(path: string, query: Readonly<Record<string, string | number | undefined>>, signal?: AbortSignal): Promise<IncomingMessage> {
    const url = new URL(path, this.#options.url.replace(/\/*$/, '/'));
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value));
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const request = send(url, {
        agent: this.#agent,
        headers: { authorization: `Bearer ${this.#options.token}` },
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
      request.end();
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}
