/**
 * A small HTTP proxy on 127.0.0.1 that behaves as the Kubernetes
 * agent-sandbox router does toward the workloads behind it: it routes by
 * `X-Sandbox-ID` (and `X-Sandbox-Port`), strips `Authorization`, strips
 * `Origin` from upgrades, and forwards upgrades with no timeout. It can cut
 * every upgraded connection at once.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http';
import { createConnection, type Socket } from 'node:net';

/** The headers sent on: routing headers are the router's, and it removes these. */
function forwarded(headers: IncomingHttpHeaders, upgrade: boolean): IncomingHttpHeaders {
  const copy: IncomingHttpHeaders = { ...headers };
  delete copy.authorization;
  if (upgrade) delete copy.origin;
  return copy;
}

export class SandboxRouter {
  readonly #server: Server;
  /** Sandbox id to the port its daemon listens on, on 127.0.0.1. */
  readonly #sandboxes: ReadonlyMap<string, number>;
  readonly #upgraded = new Set<Socket>();
  /** Every request as the router saw it, for the tests to look at. */
  readonly seen: { path: string; headers: IncomingHttpHeaders }[] = [];
  port = 0;

  private constructor(sandboxes: ReadonlyMap<string, number>) {
    this.#sandboxes = sandboxes;
    this.#server = createServer((request, response) => {
      const target = this.#route(request);
      if (typeof target === 'string') {
        response.writeHead(404, { 'content-type': 'text/plain' }).end(target);
        return;
      }
      const upstream = httpRequest(
        { host: '127.0.0.1', port: target, method: request.method, path: request.url, headers: forwarded(request.headers, false) },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
        },
      );
      upstream.on('error', () => response.destroy());
      request.pipe(upstream);
    });
    // No timeouts: a stream may stay quiet for as long as its program does.
    this.#server.requestTimeout = 0;
    this.#server.headersTimeout = 0;
    this.#server.on('upgrade', (request: IncomingMessage, client: Socket, head: Buffer) => {
      const target = this.#route(request);
      if (typeof target === 'string') {
        client.end(`HTTP/1.1 404 Not Found\r\ncontent-length: ${Buffer.byteLength(target)}\r\n\r\n${target}`);
        return;
      }
      const upstream = createConnection({ host: '127.0.0.1', port: target });
      const headers = forwarded(request.headers, true);
      const lines = [`${request.method} ${request.url} HTTP/1.1`];
      for (const [name, value] of Object.entries(headers)) for (const one of [value].flat()) if (one !== undefined) lines.push(`${name}: ${one}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      client.setNoDelay(true);
      upstream.setNoDelay(true);
      this.#upgraded.add(client);
      const drop = (): void => {
        this.#upgraded.delete(client);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  /** A router in front of `sandboxes` (id to daemon port). */
  static async start(sandboxes: Readonly<Record<string, number>>): Promise<SandboxRouter> {
    const router = new SandboxRouter(new Map(Object.entries(sandboxes)));
    await new Promise<void>((resolve) => router.#server.listen(0, '127.0.0.1', resolve));
    router.port = (router.#server.address() as { port: number }).port;
    return router;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Upgraded connections open now. */
  get connections(): number {
    return this.#upgraded.size;
  }

  /** Cuts every upgraded connection. */
  cut(): void {
    for (const socket of [...this.#upgraded]) socket.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  /** The daemon port of the request's sandbox, or why there is none. */
  #route(request: IncomingMessage): number | string {
    this.seen.push({ path: request.url ?? '', headers: request.headers });
    const id = request.headers['x-sandbox-id'];
    const port = request.headers['x-sandbox-port'];
    if (typeof id !== 'string') return 'missing X-Sandbox-ID';
    if (port !== undefined && !/^\d+$/.test(String(port))) return 'bad X-Sandbox-Port';
    return this.#sandboxes.get(id) ?? `no sandbox ${id}`;
  }
}
