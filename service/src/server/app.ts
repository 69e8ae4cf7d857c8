/**
 * The daemon's HTTP application: REST routes made from the operation table,
 * the WebSocket endpoint, auth, and the error mapping. `buildApp` never
 * listens; `serve` in cli/serve.ts does.
 * @module
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import websocket from '@fastify/websocket';
import Fastify, { LogController, type FastifyInstance, type FastifyRequest } from 'fastify';
import { pino, type Logger } from 'pino';
import { ERROR_CATALOG, LIVE_PATH, METRICS_PATH, READY_PATH, TOKEN_HEADER, WS_SUBPROTOCOL, type Access, type ErrorCode } from '@execworld/sdk/protocol';
import type { ExecutionProvider, FileProvider } from '../provider/api.ts';
import { bearerToken, headerToken, reachOf, subprotocolToken, type Principal, type TokenTable } from './auth.ts';
import { timeBody } from './body-timeouts.ts';
import { AcceptLanes } from './accept-lanes.ts';
import { ConnectionGate, defaultIdleConnections } from './connection-gate.ts';
import type { BodyBudget } from './body-budget.ts';
import type { ByteBudget } from './byte-budget.ts';
import type { Config } from './config.ts';
import { readOnlyRefusal, scopeRefusal, ServiceError, toServiceError } from './errors.ts';
import { answerClientError, answerFrameworkError, fastifyError, rawErrorResponse } from './http-errors.ts';
import { LogSink } from './log-sink.ts';
import { composeDaemon, type DaemonParts } from './compose.ts';
import type { SessionRegistry } from './sessions/registry.ts';
import type { WebSocketHub } from './ws.ts';
import type { LiveGrants } from './grants.ts';
import { registerRestRoutes } from './rest-routes.ts';
import { parseClientJson } from './json-text.ts';
import { MCP_PATH, registerMcp } from './mcp/route.ts';
import { packageVersion } from '../version.ts';
import type { DaemonImage } from './image.ts';
import type { UploadRegistry } from './uploads.ts';
import { registerUi } from './ui.ts';
import { PreviewTunnels, previewToken, registerPreview } from './preview.ts';

export const CONNECT_PATH = '/v1/connect';
/** Node's default headers timeout. */
const NODE_HEADERS_TIMEOUT_MS = 60_000;

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the request's token stands for; set before any route that needs a token (none other reads it). */
    principal: Principal;
  }
  interface FastifyContextConfig {
    /** False for routes that need no token. */
    auth?: boolean;
    /**
     * `read` for a route a read-only token may take. Any other route that
     * needs a token is refused to one (READ_ONLY), so a route that forgets to
     * say is closed to readers rather than open.
     */
    access?: Access;
    /** A browser's Origin must be allowed, as for a WebSocket upgrade (/mcp). */
    checkOrigin?: boolean;
    /** A preview route (preview.ts): its token may come in the query or its cookie, and an upgrade goes on to the app. */
    preview?: boolean;
  }
}

export interface AppOptions {
  readonly config: Config;
  readonly tokens: TokenTable;
  /** @default a pino logger at config.logLevel */
  readonly logger?: Logger;
  /** @default a LocalRuntime over this host, contained and journaled as `config` says */
  readonly runtime?: ExecutionProvider;
  /** @default this host's files */
  readonly files?: FileProvider;
  /**
   * The daemon is the whole host process (`execworld serve`): it starts
   * children only for sessions, so the subreaper fallback may take every
   * orphan reparented to it as a session's. Not so for a daemon inside a
   * process that starts children of its own (a test). @default false
   */
  readonly ownsHostProcess?: boolean;
  readonly version?: string;
  /** This image of the daemon, which health and metrics report. @default a fresh start in this process */
  readonly image?: DaemonImage;
}

export interface Daemon {
  readonly app: FastifyInstance;
  readonly registry: SessionRegistry;
  readonly hub: WebSocketHub;
  /** The bytes of JSON bodies all requests hold, against --body-budget-bytes. */
  readonly bodies: BodyBudget;
  /** The bytes answers hold while they are read and sent, against --answer-budget-bytes. */
  readonly answers: ByteBudget;
  /** What holds minted tokens: connections and waits that end when their token does. */
  readonly grants: LiveGrants;
  /** The WebSockets open through previews. */
  readonly tunnels: PreviewTunnels;
  /** What a takeover tells before its exec and after one that did not happen, and the world's files its uploads are adopted on. */
  readonly parts: Pick<DaemonParts, 'handOver' | 'resumeAfterHandOver' | 'sweepUnadoptedStages' | 'files'>;
  /** The uploads under way, which a takeover hands over. */
  readonly uploads: UploadRegistry;
  /** The handles that accept connections beside the server's own, opened once it listens (see accept-lanes.ts). */
  readonly lanes: AcceptLanes;
}

/** Per-request lines at debug: a terminal's keystrokes and long polls are requests too. */
class QuietRequests extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }
  override requestCompleted(error: Error | null, request: FastifyRequest, reply: { elapsedTime: number; statusCode: number }): void {
    request.log.debug({ statusCode: reply.statusCode, responseTime: reply.elapsedTime, err: error ?? undefined }, 'request completed');
  }
}

function errorReply(code: ErrorCode, message: string): { status: number; body: { error: { code: ErrorCode; message: string } } } {
  return { status: ERROR_CATALOG[code].status, body: { error: { code, message } } };
}

export function buildApp(options: AppOptions): Daemon {
  const { config, tokens } = options;
  const version = options.version ?? packageVersion();
  const logger =
    options.logger ??
    pino(
      {
        level: config.logLevel,
        redact: {
          paths: ['req.headers.authorization', `req.headers["${TOKEN_HEADER}"]`, 'req.headers["sec-websocket-protocol"]'],
          censor: '[redacted]',
        },
      },
      new LogSink(),
    );
  const server = {
    // Node would answer a missing Host itself, with an empty body: the onRequest hook answers it in the catalog's shape.
    requireHostHeader: false,
    // Node times the headers only (bodies: body-timeouts.ts), within its usual 60 s or a shorter request timeout.
    headersTimeout: Math.min(NODE_HEADERS_TIMEOUT_MS, config.requestTimeoutMs),
  };
  const https =
    config.tlsCert !== undefined && config.tlsKey !== undefined ? { ...server, cert: readFileSync(config.tlsCert), key: readFileSync(config.tlsKey) } : null;
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: config.maxBodyBytes,
    // Off: it would cut slow uploads, and Node applies it too coarsely (see body-timeouts.ts, which times bodies instead).
    requestTimeout: 0,
    requestIdHeader: false,
    // Shutdown must not wait on clients: every session is ended anyway.
    forceCloseConnections: true,
    // A request that still arrives while closing goes through the routes (creates answer SHUTTING_DOWN) instead of fastify's own 503 body.
    return503OnClosing: false,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
    logController: new QuietRequests(),
    ...(https === null ? { http: server } : { https }),
  }) as unknown as FastifyInstance;
  // Before fastify's own listener, so that a route that streams the body finds it timed.
  app.server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => timeBody(request, response, config.requestTimeoutMs));
  const gate = new ConnectionGate(config.maxIdleConnections ?? defaultIdleConnections(), config.connectTimeoutMs, config.maxRequestsPerOwner);
  gate.attach(app.server);
  const lanes = new AcceptLanes(app.server);

  const parts = composeDaemon({
    config,
    tokens,
    logger,
    version,
    runtime: options.runtime,
    files: options.files,
    ownsHostProcess: options.ownsHostProcess === true,
    image: options.image,
  });
  const { registry, hub, bodies, requests, metrics, dispatcher } = parts;
  metrics.watchGate(() => gate.counts);
  const tunnels = new PreviewTunnels(parts.grants);

  app.decorateRequest('principal');
  const scheme = https === null ? 'http' : 'https';

  /** Sets the request's principal from its token, or says why it may not pass. */
  const authenticate = (request: FastifyRequest, response: ServerResponse): ServiceError | undefined => {
    if (request.routeOptions.config.auth === false) return undefined;
    const isUpgrade = isWebSocketUpgrade(request);
    const token =
      bearerToken(request.headers.authorization) ??
      headerToken(request.headers[TOKEN_HEADER]) ??
      (isUpgrade ? subprotocolToken(request.headers['sec-websocket-protocol']) : undefined) ??
      (request.routeOptions.config.preview === true ? previewToken(request) : undefined);
    let refused = 'the bearer token is not valid';
    const principal = tokens.identify(token, (reason) => (refused = reason));
    if (principal === undefined) {
      metrics.authFailure();
      return new ServiceError('UNAUTHORIZED', token === undefined ? 'a bearer token is required' : refused);
    }
    request.principal = principal;
    gate.authenticated(request.raw.socket, response, principal);
    // The daemon's counts are no part of one session's or one port's.
    if (reachOf(principal) !== 'owner' && request.routeOptions.url === METRICS_PATH) return scopeRefusal(`the token is scoped: ${METRICS_PATH} is beyond it`);
    // A port's token makes no call: MCP's tools and tasks are calls (a session's token makes those of its session).
    if (reachOf(principal) === 'port' && request.routeOptions.url === MCP_PATH) return scopeRefusal(`the token is scoped to a port: ${MCP_PATH} is beyond it`);
    // Every line logged for a request on a session names the session.
    const session = (request.params as { id?: unknown } | undefined)?.id;
    if (typeof session === 'string') request.log = request.log.child({ session });
    const origin = request.headers.origin;
    // The daemon's own origin, as this request addressed it, is allowed too: a page it serves (/ui) opens its
    // WebSocket from there. That admits no ambient authority: tokens are bearer-only, never cookies (but a preview's,
    // which its own path alone reads: preview.ts), so a page
    // (even one on a name rebound to this address) gets in only with a token its user gave it. The same check
    // holds for /mcp, which the MCP transport asks of a server (a browser page may post to it as to any URL).
    const own = request.headers.host !== undefined && origin === `${scheme}://${request.headers.host}`;
    const checked = isUpgrade || request.routeOptions.config.checkOrigin === true;
    if (checked && origin !== undefined && !own && !config.allowedOrigins.includes(origin)) {
      return new ServiceError(
        'FORBIDDEN_ORIGIN',
        `origin ${origin} may not ${isUpgrade ? 'open a WebSocket' : `reach ${request.routeOptions.url ?? 'this path'}`} here`,
      );
    }
    // An unknown path stays NOT_FOUND for a reader, as for anyone with a token.
    if (principal.access === 'read' && request.routeOptions.config.access !== 'read' && !request.is404) {
      return readOnlyRefusal(`${request.method} ${request.url.split('?')[0]}`);
    }
    return undefined;
  };

  /**
   * Why an upgrade to a route that is no WebSocket is refused. The WebSocket
   * plugin passes every upgrade through the router and, for a route without a
   * WebSocket handler, completes the handshake (101) only to close the socket:
   * a client would take the REST path for a WebSocket. Only /v1/connect is one;
   * an unknown path stays NOT_FOUND.
   */
  const upgradeRefusal = (request: FastifyRequest): ServiceError | undefined =>
    request.ws && !request.is404 && request.routeOptions.config.preview !== true
      ? new ServiceError('INVALID_ARGUMENT', `${request.url.split('?')[0]} is not a WebSocket: the daemon's one WebSocket is GET ${CONNECT_PATH}`)
      : undefined;

  // One JSON parser: an empty body is {}, anything unparsable is a clear 400.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (text.trim() === '') {
      done(null, {});
      return;
    }
    try {
      done(null, parseClientJson(text, 'the request body'));
    } catch (error) {
      done(error as ServiceError, undefined);
    }
  });

  app.setErrorHandler((error, request, reply) => {
    const serviceError = fastifyError(error, request.routeOptions.bodyLimit ?? config.maxBodyBytes) ?? toServiceError(error);
    if (serviceError.status >= 500) request.log.error({ err: error }, 'request failed');
    else request.log.info({ code: serviceError.code }, 'request refused');
    // A request refused before its body was read (no token, too large): the connection
    // closes after the answer instead of reading on, perhaps forever, to reuse it.
    if (!request.raw.complete) void reply.header('connection', 'close');
    void reply.code(serviceError.status).send({ error: serviceError.body() });
  });

  // Upgraded sockets keep the server open: close them before the server waits for its connections.
  app.addHook('preClose', (done) => {
    lanes.close();
    hub.closeAll();
    tunnels.closeAll();
    done();
  });
  app.addHook('onReady', () => parts.recover());
  app.addHook('onClose', () => parts.close());

  void app.register(websocket, {
    options: {
      maxPayload: config.maxFrameBytes,
      handleProtocols: (protocols: Set<string>) => (protocols.has(WS_SUBPROTOCOL) ? WS_SUBPROTOCOL : false),
    },
  });

  // Registered after the WebSocket plugin, so its hooks (which close a refused upgrade's socket) run first.
  void app.register((scope, _options, registered) => {
    scope.setNotFoundHandler((request, reply) => {
      const { status, body } = errorReply('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`);
      void reply.code(status).send(body);
    });

    // Every route needs a token unless it says otherwise; unknown paths too, so nothing is told to a stranger.
    scope.addHook('onRequest', (request: FastifyRequest, reply, done) => {
      // HTTP/1.1 requires Host (RFC 9112 §3.2); Node's own check answers without a body, so it is made here.
      if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
        done(new ServiceError('INVALID_ARGUMENT', 'an HTTP/1.1 request needs a Host header'));
        return;
      }
      const refusal =
        authenticate(request, reply.raw) ??
        (request.routeOptions.url === CONNECT_PATH ? hub.refusal(request.principal) : upgradeRefusal(request)) ??
        // A WebSocket's connection is counted among the owner's connections, not its requests; a preview's
        // requests and WebSockets are its app's visitors', counted apart from the owner's calls, a WebSocket
        // while its socket (its tunnel) is open.
        (request.routeOptions.config.auth === false
          ? undefined
          : request.routeOptions.config.preview === true
            ? requests.admit(request.principal, isWebSocketUpgrade(request) ? request.raw.socket : reply.raw, 'preview')
            : isWebSocketUpgrade(request)
              ? undefined
              : requests.admit(request.principal, reply.raw));
      done(refusal);
    });

    // Probes, for an orchestrator; no token. Live: the event loop answers. Ready: listening with
    // its tokens loaded (it listens only once both hold) and not shutting down.
    scope.route({ method: 'GET', url: LIVE_PATH, config: { auth: false }, handler: (_request, reply) => reply.send({ status: 'live' }) });
    scope.route({
      method: 'GET',
      url: METRICS_PATH,
      config: { auth: config.metricsAuth === 'token', access: 'read' },
      handler: async (_request, reply) => {
        const { contentType, body } = await metrics.text();
        return reply.type(contentType).send(body);
      },
    });
    scope.route({
      method: 'GET',
      url: READY_PATH,
      config: { auth: false },
      handler: (_request, reply) => {
        if (!registry.shuttingDown && app.server.listening) return reply.send({ status: 'ready' });
        const { status, body } = errorReply('SHUTTING_DOWN', 'the daemon is shutting down');
        return reply.code(status).send(body);
      },
    });

    registerRestRoutes(scope, { dispatcher, bodies, maxBodyBytes: config.maxBodyBytes });
    registerMcp(scope, { dispatcher, bodies, maxBodyBytes: config.maxBodyBytes, version, log: logger });

    if (config.ui === 'on') registerUi(scope);
    registerPreview(scope, { connect: parts.connect, scheme, tunnels, grants: parts.grants });

    scope.route({
      method: 'GET',
      url: CONNECT_PATH,
      // A read token's connection is refused each call that acts (ws.ts), not the connection.
      config: { access: 'read' },
      wsHandler: (socket, request) => {
        hub.accept(socket, request.raw.socket, request.principal, request.log);
      },
      // Without the upgrade headers the plugin's default would be an empty 404.
      handler: (_request, reply) => {
        void reply.header('upgrade', 'websocket');
        throw new ServiceError('UPGRADE_REQUIRED', `${CONNECT_PATH} is a WebSocket: send an upgrade offering the subprotocol ${WS_SUBPROTOCOL}`);
      },
    });
    // A handshake ws refuses (a bad Sec-WebSocket-Key or -Version, say) is answered in the catalog's shape, not ws's text/html.
    scope.websocketServer.on('wsClientError', (error: Error, socket: Duplex) => {
      if (socket.writable) socket.write(rawErrorResponse(new ServiceError('INVALID_ARGUMENT', `WebSocket handshake refused: ${error.message}`)));
      socket.destroy();
    });
    registered();
  });

  return { app, registry, hub, bodies, answers: parts.answers, grants: parts.grants, tunnels, parts, uploads: parts.uploads, lanes };
}

/** Whether `request` asks to become a WebSocket. */
function isWebSocketUpgrade(request: FastifyRequest): boolean {
  return request.headers.upgrade?.toLowerCase() === 'websocket';
}
