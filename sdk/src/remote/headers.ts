/**
 * The headers every request to a daemon carries: the token, where the caller
 * says it travels, and the caller's own (a router's routing headers).
 * @module
 */
import { TOKEN_HEADER } from '../protocol/http.ts';
import { invalidArgument } from '../errors.ts';

/**
 * Where the token travels: `authorization` (`Authorization: Bearer …`), or
 * `x-execworld-token` for a proxy that strips `Authorization`.
 */
export type TokenHeader = 'authorization' | typeof TOKEN_HEADER;

/** Headers a caller may not set: the token's, and those of the transport and its upgrade. */
const RESERVED = new Set(['authorization', TOKEN_HEADER, 'host', 'connection', 'upgrade', 'content-length', 'transfer-encoding', 'content-type']);

/** An RFC 9110 field name. */
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * The headers of every request: `extra`, then the token in `tokenHeader`.
 * @throws {InvalidRequestError} INVALID_ARGUMENT for a header that is not a field
 * name, a value with a line break or NUL, or a reserved header.
 */
export function daemonHeaders(token: string, tokenHeader: TokenHeader = 'authorization', extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  // Checked as a value: a JavaScript caller can pass anything.
  const where: unknown = tokenHeader;
  if (where !== 'authorization' && where !== TOKEN_HEADER) {
    throw invalidArgument(`options.tokenHeader must be 'authorization' or '${TOKEN_HEADER}', got ${JSON.stringify(where)}`);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(extra)) {
    const lower = name.toLowerCase();
    if (!FIELD_NAME.test(name)) throw invalidArgument(`options.headers: ${JSON.stringify(name)} is not a header name`);
    if (RESERVED.has(lower) || lower.startsWith('sec-websocket-')) throw invalidArgument(`options.headers: ${name} is set by the SDK itself`);
    if (typeof value !== 'string' || /[\r\n\0]/.test(value)) throw invalidArgument(`options.headers.${name} must be a string without line breaks or NUL`);
    headers[lower] = value;
  }
  headers[tokenHeader] = tokenHeader === 'authorization' ? `Bearer ${token}` : token;
  return headers;
}

/** The agent-sandbox router's default port of the workload. */
export const SANDBOX_ROUTER_PORT = 8888;

/**
 * The options that reach a daemon through the Kubernetes agent-sandbox
 * router: its routing headers, and the token in `X-Execworld-Token`, since
 * the router strips `Authorization`. Spread them into `connect`'s options:
 * `connect(routerUrl, { token, ...sandboxRouter('my-sandbox') })`.
 */
export function sandboxRouter(sandboxId: string, port = SANDBOX_ROUTER_PORT): { headers: Record<string, string>; tokenHeader: TokenHeader } {
  if (typeof sandboxId !== 'string' || sandboxId === '') throw invalidArgument('sandboxId must be a non-empty string');
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw invalidArgument(`port must be an integer from 1 to 65535, got ${String(port)}`);
  return { headers: { 'X-Sandbox-ID': sandboxId, 'X-Sandbox-Port': String(port) }, tokenHeader: TOKEN_HEADER };
}
