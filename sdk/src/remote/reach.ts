/**
 * Reaching a daemon before the WebSocket: the health request, with the CA the
 * caller trusts, and the words for why a daemon could not be reached.
 * @module
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** PEM certificates to trust for a daemon with its own certificate, as Node's `tls` takes them. */
export type CertificateAuthority = string | Buffer | readonly (string | Buffer)[];

/** The largest health answer read; the real one is a few hundred bytes. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** GETs `url` and parses its JSON answer, trusting `ca` for HTTPS; rejects with Node's own error (its `code` intact) when the daemon cannot be reached. */
export function getJson(
  url: string,
  options: { readonly ca: CertificateAuthority | undefined; readonly timeoutMs: number; readonly headers?: Readonly<Record<string, string>> | undefined },
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const secure = url.startsWith('https:');
    // A connection of its own (agent: false) so no pooled socket outlives the check.
    const request = (secure ? httpsRequest : httpRequest)(
      url,
      {
        agent: false,
        headers: { ...options.headers, connection: 'close' },
        ...(secure && options.ca !== undefined ? { ca: options.ca as string | Buffer | (string | Buffer)[] } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) request.destroy(new Error(`the answer of ${url} is larger than ${MAX_ANSWER_BYTES} bytes: not an execworld daemon`));
          else chunks.push(chunk);
        });
        response.once('end', () => {
          clearTimeout(timer);
          try {
            resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          } catch (_error) {
            reject(new Error(`${url} answered ${response.statusCode ?? 0} with something other than JSON: not an execworld daemon`));
          }
        });
      },
    );
    const timer = setTimeout(
      () => request.destroy(Object.assign(new Error(`no answer within ${options.timeoutMs} ms`), { code: 'ETIMEDOUT' })),
      options.timeoutMs,
    );
    request.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    request.end();
  });
}

/** OpenSSL's verdicts on a certificate chain the client does not trust. */
const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
]);

/** The first `code` along an error's causes (fetch and ws wrap Node's). */
function codeOf(error: unknown): string | undefined {
  for (
    let current = error, depth = 0;
    current !== null && typeof current === 'object' && depth < 5;
    current = (current as { cause?: unknown }).cause, depth += 1
  ) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/**
 * Why the daemon at `url` could not be reached, in words that name the cause
 * and what to do: a refused connection with its host and port, a certificate
 * this client does not trust and how to pass its CA, a name that does not resolve.
 */
export function describeUnreachable(url: string, error: unknown): string {
  const { hostname, port, protocol } = new URL(url);
  const where = `${hostname}:${port === '' ? (protocol === 'https:' ? '443' : '80') : port}`;
  const code = codeOf(error);
  const detail = error instanceof Error ? error.message : String(error);
  if (code === 'ECONNREFUSED') return `the connection to ${where} was refused (ECONNREFUSED): no daemon listens there; is it running, and on that port?`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `cannot resolve the daemon's host ${hostname} (${code})`;
  if (code === 'ETIMEDOUT') return `no answer from ${where} (${detail})`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return `the daemon's TLS certificate does not name ${hostname} (${code}): connect with a host name the certificate names`;
  if (code !== undefined && UNTRUSTED.has(code)) {
    return (
      `the daemon's TLS certificate is not trusted by this client (${code}: ${detail}): pass the certificate ` +
      `of the CA that signed it, or a self-signed daemon's own certificate, as connect(url, { ca: readFileSync('ca.pem') })`
    );
  }
  if (code === 'EPROTO' || code === 'ERR_SSL_WRONG_VERSION_NUMBER') return `no TLS at ${where} (${code}): if the daemon serves plain HTTP, use an http:// URL`;
  return `cannot reach the daemon at ${where}: ${detail}${code === undefined || detail.includes(code) ? '' : ` (${code})`}`;
}
