/**
 * Preview URLs: HTTP and WebSocket to a port in the world, through the
 * daemon, at `/v1/ports/{port}/…`. A browser loads a dev server's page, its
 * assets and its live-reload WebSocket there; the app gets the request as if
 * it were asked at `localhost:{port}/…`, with the `X-Forwarded-*` headers
 * saying where it was really asked, and never the daemon's credentials.
 *
 * A browser cannot send a header with a navigation, so the token may come as
 * the query parameter `token` of the first request: the daemon answers with a
 * cookie scoped to the port's path and a redirect to the same URL without the
 * token, so that it leaves the address bar (and the app's logs and Referer).
 *
 * Bodies stream both ways through Node's pipes, so what is held is bounded by
 * their high-water marks, never a whole body. An upgrade (a WebSocket) is
 * passed on byte for byte: the app answers the handshake itself, and the two
 * sockets are then piped into each other.
 * @module
 */
import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { pipeline } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TOKEN_HEADER, WS_TOKEN_PROTOCOL_PREFIX } from '@execworld/sdk/protocol';
import type { Principal } from './auth.ts';
import { bodyIsStreamed } from './body-timeouts.ts';
import { ServiceError } from './errors.ts';
import type { LiveGrants } from './grants.ts';
import { rawErrorResponse } from './http-errors.ts';
import { connectFailure, portRefusal } from './port-access.ts';
import type { RunAs } from '../provider/api.ts';

export const PORTS_PATH = '/v1/ports';
/** The cookie a preview's token is kept in, scoped to the port's path. */
export const PREVIEW_COOKIE = 'execworld_preview';
/** The query parameter a preview's first request may carry its token in. */
export const PREVIEW_TOKEN_PARAM = 'token';

/** Connects to a port in the world as an owner's OS user. */
export type PortConnector = (runAs: RunAs | undefined, port: number) => Promise<Socket>;

/** Headers of one hop only (RFC 9110 §7.6.1): never passed on. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
/** The daemon's credentials, which the app never sees. */
const CREDENTIAL_HEADERS = new Set(['authorization', TOKEN_HEADER]);

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** The port of a preview's path, 1 to 65535. @throws {ServiceError} INVALID_ARGUMENT for anything else. */
export function previewPort(text: string): number {
  const port = /^[1-9]\d{0,4}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port <= 65_535)) throw new ServiceError('INVALID_ARGUMENT', `port: ${JSON.stringify(text.slice(0, 16))} is not a TCP port (1 to 65535)`);
  return port;
}

/** The cookies of a Cookie header, by name (the first of a name wins), and the header without the daemon's own. */
function cookies(header: string | undefined): { preview: string | undefined; others: string | undefined } {
  let preview: string | undefined;
  const others: string[] = [];
  for (const part of (header ?? '').split(';')) {
    const pair = part.trim();
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const name = equals < 0 ? pair : pair.slice(0, equals);
    if (name === PREVIEW_COOKIE) {
      try {
        preview ??= decodeURIComponent(pair.slice(equals + 1));
      } catch (_error) {
        // A value that is not ours to decode is no token.
      }
    } else others.push(pair);
  }
  return { preview, others: others.length === 0 ? undefined : others.join('; ') };
}

/** A request's URL taken apart without normalising its path: what the app is asked for is what the client asked for. */
interface PreviewUrl {
  readonly port: number;
  /** `/v1/ports/{port}`, as the request spelled it. */
  readonly prefix: string;
  /** The path after the prefix, `/` when there is none. */
  readonly path: string;
  /** Whether the request named the port without a path after it. */
  readonly bare: boolean;
  /** The query without the token parameter, with its `?`; empty when nothing is left. */
  readonly query: string;
  /** The token of the query, if it carried one. */
  readonly token: string | undefined;
}

function previewUrl(url: string): PreviewUrl {
  const mark = url.indexOf('?');
  const path = mark < 0 ? url : url.slice(0, mark);
  const match = /^\/v1\/ports\/([^/]*)(.*)$/.exec(path);
  if (match === null) throw new ServiceError('NOT_FOUND', `no route ${path}`);
  const port = previewPort(match[1]!);
  let token: string | undefined;
  const kept: string[] = [];
  for (const pair of mark < 0 ? [] : url.slice(mark + 1).split('&')) {
    const equals = pair.indexOf('=');
    const name = equals < 0 ? pair : pair.slice(0, equals);
    if (name === PREVIEW_TOKEN_PARAM) {
      try {
        token ??= decodeURIComponent(pair.slice(equals + 1).replace(/\+/g, ' '));
      } catch (_error) {
        token ??= '';
      }
    } else if (pair !== '') kept.push(pair);
  }
  const rest = match[2]!;
  return {
    port,
    prefix: `${PORTS_PATH}/${match[1]!}`,
    path: rest === '' ? '/' : rest,
    bare: rest === '',
    query: kept.length === 0 ? '' : `?${kept.join('&')}`,
    token,
  };
}

/**
 * The token a preview request carries where a browser can put it: the query
 * parameter (a first request) or the preview's cookie. Headers are read
 * first, by the daemon's own authentication.
 */
export function previewToken(request: FastifyRequest): string | undefined {
  const url = request.raw.url ?? '';
  const mark = url.indexOf('?');
  if (mark >= 0) {
    for (const pair of url.slice(mark + 1).split('&')) {
      if (pair.startsWith(`${PREVIEW_TOKEN_PARAM}=`)) {
        try {
          return decodeURIComponent(pair.slice(PREVIEW_TOKEN_PARAM.length + 1).replace(/\+/g, ' '));
        } catch (_error) {
          return undefined;
        }
      }
    }
  }
  return cookies(request.headers.cookie).preview;
}

/** What the daemon tells the app of where the request really came from, and under which prefix. */
interface Forwarded {
  readonly scheme: 'http' | 'https';
  readonly prefix: string;
  readonly port: number;
}

/**
 * The headers the app gets: the client's, without the ones of this hop and
 * without the daemon's credentials; `Host` as the app would see it asked
 * directly (`localhost:{port}`, which dev servers that check Host admit);
 * `X-Forwarded-*` saying where it was asked. For an upgrade, its own headers.
 */
function upstreamHeaders(request: IncomingMessage, forwarded: Forwarded, upgrade: boolean): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || CREDENTIAL_HEADERS.has(name) || name === 'cookie' || name === 'host') continue;
    if (name.startsWith('x-forwarded-') && name !== 'x-forwarded-for') continue;
    headers[name] = value;
  }
  const others = cookies(request.headers.cookie).others;
  if (others !== undefined) headers.cookie = others;
  if (upgrade) {
    headers.connection = 'Upgrade';
    headers.upgrade = request.headers.upgrade;
    // A client that authenticated with the daemon's subprotocol does not offer it to the app.
    const protocols = String(request.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((protocol) => protocol.trim())
      .filter((protocol) => protocol !== '' && !protocol.startsWith(WS_TOKEN_PROTOCOL_PREFIX));
    if (protocols.length > 0) headers['sec-websocket-protocol'] = protocols.join(', ');
    else delete headers['sec-websocket-protocol'];
  }
  headers.host = `localhost:${forwarded.port}`;
  const client = request.socket.remoteAddress ?? '';
  const before = request.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = before === undefined ? client : `${String(before)}, ${client}`;
  headers['x-forwarded-proto'] = forwarded.scheme;
  if (request.headers.host !== undefined) headers['x-forwarded-host'] = request.headers.host;
  headers['x-forwarded-prefix'] = forwarded.prefix;
  return headers;
}

/** The app's answer's headers for the client: without the ones of the app's hop; a redirect to a path of the app stays under the prefix. */
function downstreamHeaders(response: IncomingMessage, prefix: string): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || BEYOND_THE_PREFIX.has(name)) continue;
    headers[name] = value;
  }
  const cookies = response.headers['set-cookie']?.flatMap((cookie) => appCookie(cookie, prefix) ?? []);
  if (cookies !== undefined) headers['set-cookie'] = cookies;
  const location = response.headers.location;
  if (location?.startsWith('/') === true && !location.startsWith('//')) headers.location = `${prefix}${location}`;
  return headers;
}

/**
 * Answer headers of an app that would reach beyond its prefix on the daemon's origin, which it shares: a service
 * worker allowed a wider scope than its script's path could control the `/ui` page (and read the token typed into
 * it); Clear-Site-Data would wipe the origin's storage, the browser view's included.
 */
const BEYOND_THE_PREFIX = new Set(['service-worker-allowed', 'clear-site-data']);

/**
 * An app's cookie as the browser gets it through the preview: its path moved under the prefix (as a reverse proxy
 * rewrites a cookie's path), so it reaches no other path of the daemon's origin; undefined for a cookie of the
 * daemon's own name, which an app may not set or replace.
 */
function appCookie(cookie: string, prefix: string): string | undefined {
  const [pair = '', ...attributes] = cookie.split(';');
  if (pair.split('=')[0]!.trim() === PREVIEW_COOKIE) return undefined;
  const kept = attributes.map((attribute) => {
    const [name = '', ...value] = attribute.split('=');
    if (name.trim().toLowerCase() !== 'path') return attribute;
    const path = value.join('=').trim();
    return path === prefix || path.startsWith(`${prefix}/`) ? attribute : ` Path=${prefix}${path.startsWith('/') ? path : `/${path}`}`;
  });
  // A cookie without a path takes the request's directory, which is under the prefix already.
  return [pair, ...kept].join(';');
}

/** One proxied WebSocket: the browser's socket and the app's, ended together. */
export interface PreviewTunnel {
  readonly principal: Principal;
  readonly port: number;
}

/**
 * The WebSockets open through previews, so that one can be ended and all of them at shutdown. Each is held as a
 * grant of its token: it ends when a minted token expires or is revoked.
 */
export class PreviewTunnels {
  readonly #open = new Map<PreviewTunnel, { client: Socket; upstream: Socket; release: () => void }>();
  readonly #grants: Pick<LiveGrants, 'hold'> | undefined;

  constructor(grants?: Pick<LiveGrants, 'hold'>) {
    this.#grants = grants;
  }

  /** Pipes `client` and `upstream` into each other until either ends; the tunnel is forgotten when both are closed. */
  open(principal: Principal, port: number, client: Socket, upstream: Socket): PreviewTunnel {
    const tunnel: PreviewTunnel = { principal, port };
    this.#open.set(tunnel, { client, upstream, release: () => {} });
    const release = this.#grants?.hold(principal, () => this.end(tunnel));
    const open = this.#open.get(tunnel);
    if (open !== undefined && release !== undefined) open.release = release;
    else release?.();
    const end = (): void => this.end(tunnel);
    // pipe() holds back a side whose reader is slow: at most a high-water mark of bytes waits on each.
    client.pipe(upstream).on('error', end);
    upstream.pipe(client).on('error', end);
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    return tunnel;
  }

  /** Ends one proxied WebSocket: both of its sockets close at once (the browser sees its connection drop). */
  end(tunnel: PreviewTunnel): void {
    const sockets = this.#open.get(tunnel);
    if (sockets === undefined) return;
    this.#open.delete(tunnel);
    sockets.release();
    sockets.client.destroy();
    sockets.upstream.destroy();
  }

  get size(): number {
    return this.#open.size;
  }

  closeAll(): void {
    for (const tunnel of [...this.#open.keys()]) this.end(tunnel);
  }
}

export interface PreviewOptions {
  readonly connect: PortConnector;
  /** What ends a preview's answer under way when its minted token expires or is revoked. */
  readonly grants: Pick<LiveGrants, 'hold'>;
  readonly scheme: 'http' | 'https';
  readonly tunnels: PreviewTunnels;
}

/** The header of a cookie keeping a preview's token, for the port's path only. */
function previewCookie(token: string, prefix: string, scheme: 'http' | 'https'): string {
  // HttpOnly: the app's scripts cannot read it. SameSite=Lax rather than Strict: a preview link followed from
  // another site (a chat, a mail) is a cross-site navigation, and Strict would withhold the cookie from the redirect
  // that follows it too, so the page would answer 401. Lax sends it on top-level GET navigations only, never with a
  // cross-site subresource, frame or POST.
  return `${PREVIEW_COOKIE}=${encodeURIComponent(token)}; Path=${prefix}; HttpOnly; SameSite=Lax${scheme === 'https' ? '; Secure' : ''}`;
}

/**
 * Adds the preview routes to `scope`. The token is looked for in the query and
 * the cookie by the daemon's authentication (see {@link previewToken}); here
 * the port is checked against it with `permitsPort`.
 */
export function registerPreview(scope: FastifyInstance, options: PreviewOptions): void {
  const { connect, scheme, tunnels, grants } = options;

  /** An upgrade is passed to the app byte for byte: the app answers the handshake. */
  const tunnel = (request: FastifyRequest, reply: FastifyReply, url: PreviewUrl): void => {
    reply.hijack();
    const client = request.raw.socket;
    // The bytes that came after the upgrade's headers, which the WebSocket plugin keeps under a symbol of its own;
    // a client waits for the handshake's answer before it sends a frame, so they are nearly always none.
    const headSymbol = Object.getOwnPropertySymbols(request.raw).find((symbol) => symbol.description === 'ws-head');
    const head = headSymbol === undefined ? undefined : (request.raw as unknown as Record<symbol, Buffer | undefined>)[headSymbol];
    connect(request.principal.runAs, url.port).then(
      (upstream) => {
        if (client.destroyed) {
          upstream.destroy();
          return;
        }
        const headers = upstreamHeaders(request.raw, { scheme, prefix: url.prefix, port: url.port }, true);
        const lines = [`${request.method} ${url.path}${url.query} HTTP/1.1`];
        for (const [name, value] of Object.entries(headers)) {
          for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${String(one)}`);
        }
        upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
        if (head !== undefined && head.length > 0) upstream.write(head);
        tunnels.open(request.principal, url.port, client, upstream);
      },
      (error: unknown) => {
        if (client.writable) client.write(rawErrorResponse(connectFailure(url.port, error)));
        client.destroy();
      },
    );
  };

  const proxy = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const url = previewUrl(request.raw.url ?? '');
    // The app's page must be asked for under a path ending in /, so that its relative URLs resolve under the prefix.
    // A token in the query moves to the cookie: the redirect takes it out of the address bar before the app is asked.
    const navigation = request.method === 'GET' || request.method === 'HEAD';
    if (navigation && (url.bare || url.token !== undefined)) {
      if (url.token !== undefined) void reply.header('set-cookie', previewCookie(url.token, url.prefix, scheme));
      void reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
      return reply.redirect(`${url.prefix}${url.path}${url.query}`, 303);
    }
    // Streamed: timed by its pauses, not its length, as an upload is.
    bodyIsStreamed(request.raw);
    let upstream: Socket;
    try {
      upstream = await connect(request.principal.runAs, url.port);
    } catch (error) {
      request.raw.resume();
      throw connectFailure(url.port, error);
    }
    reply.hijack();
    const response = reply.raw;
    const outgoing = httpRequest({
      createConnection: () => upstream,
      method: request.method,
      path: `${url.path}${url.query}`,
      headers: upstreamHeaders(request.raw, { scheme, prefix: url.prefix, port: url.port }, false),
    });
    // The daemon's connect answers its socket paused, so that nothing of it is read before a reader is there; the HTTP
    // client's reader is there once the socket is its own.
    outgoing.once('socket', (socket) => socket.resume());
    outgoing.on('response', (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.statusMessage, downstreamHeaders(answer, url.prefix));
      pipeline(answer, response, (error) => {
        if (error !== undefined && error !== null) upstream.destroy();
      });
    });
    outgoing.on('error', (error) => {
      if (!response.headersSent) {
        const refusal = new ServiceError('PORT_REFUSED', `the app on port ${url.port} closed without an answer: ${error.message}`);
        response.writeHead(refusal.status, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
        response.end(JSON.stringify({ error: refusal.body() }));
      } else response.destroy();
    });
    // An answer under way (a stream of events, a long download) ends when its minted token does.
    const release = grants.hold(request.principal, () => {
      outgoing.destroy();
      response.destroy();
    });
    // A client that goes away ends the app's request too.
    response.on('close', () => {
      release();
      if (!response.writableFinished) outgoing.destroy();
    });
    pipeline(request.raw, outgoing, () => {
      // An error of either side is answered above, by the response's or the outgoing request's handler.
    });
  };

  const route = (target: FastifyInstance, url: string): void => {
    target.route({
      method: [...METHODS],
      url,
      exposeHeadRoute: false,
      config: { access: 'read', preview: true },
      preHandler: (request, reply, done) => {
        let parsed: PreviewUrl;
        try {
          parsed = previewUrl(request.raw.url ?? '');
        } catch (error) {
          done(error as ServiceError);
          return;
        }
        const refusal = portRefusal(request.principal, parsed.port);
        if (refusal !== undefined) {
          done(refusal);
          return;
        }
        if (request.ws) tunnel(request, reply, parsed);
        done();
      },
      handler: proxy,
    });
  };
  void scope.register((inner, _options, done) => {
    // Bodies of any type, or none, reach the app unread.
    inner.removeAllContentTypeParsers();
    inner.addContentTypeParser('*', (_request, _payload, parsed) => parsed(null, undefined));
    route(inner, `${PORTS_PATH}/:port`);
    route(inner, `${PORTS_PATH}/:port/*`);
    done();
  });
}
