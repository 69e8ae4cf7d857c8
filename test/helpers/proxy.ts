/** A TCP proxy on 127.0.0.1 that can cut or stall every connection through it. */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export class FaultProxy {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #stalled = false;
  port = 0;

  #targetPort: number;

  private constructor(targetPort: number) {
    this.#targetPort = targetPort;
    this.#server = createServer((client) => {
      const upstream = createConnection({ host: '127.0.0.1', port: this.#targetPort });
      // Like the endpoints themselves: a proxy must not add Nagle delays to small messages.
      client.setNoDelay(true);
      upstream.setNoDelay(true);
      const pair: [Socket, Socket] = [client, upstream];
      this.#pairs.add(pair);
      const drop = (): void => {
        this.#pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      // A connection made during a stall waits for resume() to be piped.
      if (!this.#stalled) this.#pipe(pair);
    });
  }

  #piped = new WeakSet<[Socket, Socket]>();

  #pipe(pair: [Socket, Socket]): void {
    if (this.#piped.has(pair)) return;
    this.#piped.add(pair);
    const [client, upstream] = pair;
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
    upstream.resume();
  }

  static async start(targetPort: number): Promise<FaultProxy> {
    const proxy = new FaultProxy(targetPort);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    const address = proxy.#server.address();
    proxy.port = typeof address === 'object' && address !== null ? address.port : 0;
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get connections(): number {
    return this.#pairs.size;
  }

  /** Sends new connections to another port on 127.0.0.1 (a daemon that replaced the first, say). */
  retarget(port: number): void {
    this.#targetPort = port;
  }

  /** Destroys every connection at once, as a network failure would. */
  cut(): void {
    for (const [client, upstream] of this.#pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.#pairs.clear();
  }

  /** Stops moving bytes in both directions, keeping the connections open. */
  stall(): void {
    this.#stalled = true;
    for (const pair of this.#pairs) {
      const [client, upstream] = pair;
      this.#piped.delete(pair);
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  resume(): void {
    this.#stalled = false;
    for (const pair of this.#pairs) this.#pipe(pair);
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** What can cut the connections through it: this proxy, or the router of test/helpers/sandbox-router.ts. */
export interface Cuttable {
  readonly connections: number;
  cut(): void;
}

/** Cuts every connection through `target` at random moments until `done` settles; counts the cuts in `cuts`. */
export async function cutRandomly(target: Cuttable, done: Promise<unknown>, cuts: { count: number } = { count: 0 }): Promise<void> {
  let finished = false;
  void done.finally(() => (finished = true));
  while (!finished) {
    await sleep(20 + Math.random() * 150);
    if (!finished && target.connections > 0) {
      target.cut();
      cuts.count += 1;
    }
  }
}
