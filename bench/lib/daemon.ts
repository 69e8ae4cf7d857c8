/**
 * A lean client of the daemon's WebSocket protocol that keeps no history, for
 * the workloads that drive the protocol itself (stalls, isolation).
 */
export { startDaemon, type DaemonProcess } from '../../test/helpers/daemon-process.ts';
import { WebSocket } from 'ws';
import { WS_SUBPROTOCOL, type ServerMessage } from '@execworld/sdk/protocol';

type Pending = { resolve: (value: any) => void; reject: (error: Error) => void; onResult?: (result: any) => void };

/** One WebSocket to the daemon: calls, subscriptions, acks. */
export class Connection {
  readonly socket: WebSocket;
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();
  readonly #data = new Map<number, (offset: number, payload: Buffer, sub: number) => void>();
  readonly #ends = new Map<number, () => void>();

  private constructor(socket: WebSocket) {
    this.socket = socket;
    socket.on('message', (raw: Buffer, isBinary) => {
      if (isBinary) {
        const sub = raw.readUInt32BE(1);
        this.#data.get(sub)?.(Number(raw.readBigUInt64BE(5)), raw.subarray(13), sub);
        return;
      }
      const message = JSON.parse(raw.toString('utf8')) as ServerMessage;
      if (message.t === 'result' || message.t === 'error') {
        const pending = message.id === null ? undefined : this.#pending.get(message.id);
        if (pending === undefined) return;
        this.#pending.delete(message.id!);
        if (message.t === 'result') {
          // Synchronously: data frames of a new subscription may follow in the same chunk.
          pending.onResult?.(message.result);
          pending.resolve(message.result);
        }
        else pending.reject(Object.assign(new Error(message.error.message), { code: message.error.code }));
      } else if (message.t === 'end') {
        this.#ends.get(message.sub)?.();
      }
    });
  }

  static open(url: string, token: string): Promise<Connection> {
    const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/connect`, [WS_SUBPROTOCOL], { headers: { authorization: `Bearer ${token}` } });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(new Connection(socket)));
      socket.once('error', reject);
    });
  }

  #request(message: Record<string, unknown>, onResult?: (result: any) => void): Promise<any> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, ...(onResult === undefined ? {} : { onResult }) });
      this.socket.send(JSON.stringify({ ...message, id }));
    });
  }

  call(op: string, params: Record<string, unknown> = {}): Promise<any> {
    return this.#request({ t: 'call', op, params });
  }

  /**
   * Subscribes; `onData` gets every frame (the first ones may come before this
   * resolves, hence the sub argument), `onEnd` the end of the stream.
   */
  async subscribe(target: { kind: string; id: string; stream: string }, from: number, window: number, onData: (offset: number, payload: Buffer, sub: number) => void, onEnd: () => void): Promise<number> {
    const result = (await this.#request({ t: 'subscribe', params: { target, from, window } }, (subscribed: { sub: number }) => {
      this.#data.set(subscribed.sub, onData);
      this.#ends.set(subscribed.sub, onEnd);
    })) as { sub: number };
    return result.sub;
  }

  ack(sub: number, offset: number): void {
    this.socket.send(JSON.stringify({ t: 'ack', sub, offset }));
  }

  close(): void {
    this.socket.close();
  }
}
