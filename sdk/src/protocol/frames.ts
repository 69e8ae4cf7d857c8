/**
 * The WebSocket protocol of `GET /v1/connect`: JSON text messages for calls,
 * subscriptions, acknowledgements and events; binary frames for stream data.
 *
 * A data frame is a 13-byte header and the payload:
 *   byte 0      kind (1 = data)
 *   bytes 1-4   subscription id, uint32 big-endian
 *   bytes 5-12  byte offset of the payload's first byte, uint64 big-endian
 * @module
 */
import { z } from 'zod';
import { ErrorBody } from './errors.ts';

/** Subprotocol the daemon selects; clients must offer it. */
export const WS_SUBPROTOCOL = 'execworld.v1';
/** Prefix of the Kubernetes-style subprotocol that carries a bearer token for browsers. */
export const WS_TOKEN_PROTOCOL_PREFIX = 'base64url.bearer.authorization.k8s.io.';

export const DATA_FRAME = 1;
export const DATA_HEADER_BYTES = 13;

export const StreamRef = z
  .strictObject({
    kind: z.enum(['terminal', 'process']),
    id: z.string(),
    stream: z.enum(['output', 'stdout', 'stderr']).meta({ description: "A terminal has 'output'; a process 'stdout' and 'stderr'." }),
  })
  .meta({ id: 'StreamRef' });
export type StreamRef = z.infer<typeof StreamRef>;

export const SubscribeParams = z
  .strictObject({
    target: StreamRef,
    from: z.int().min(0).max(Number.MAX_SAFE_INTEGER).meta({ description: 'First byte offset wanted.' }),
    window: z
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .optional()
      .meta({ description: 'Bytes the daemon may send beyond the last ack.' }),
  })
  .meta({ id: 'SubscribeParams' });
export const SubscribeResult = z
  .object({
    sub: z.int(),
    from: z.int().meta({ description: 'Where delivery starts: from, or the oldest retained byte when from is gone.' }),
    gap: z.object({ from: z.int(), to: z.int() }).nullable(),
  })
  .meta({ id: 'SubscribeResult' });

export const ClientMessage = z
  .discriminatedUnion('t', [
    z.strictObject({ t: z.literal('call'), id: z.int().min(0), op: z.string(), params: z.record(z.string(), z.unknown()).optional() }),
    z.strictObject({ t: z.literal('subscribe'), id: z.int().min(0), params: SubscribeParams }),
    z.strictObject({ t: z.literal('unsubscribe'), id: z.int().min(0), sub: z.int() }),
    z.strictObject({ t: z.literal('ack'), sub: z.int(), offset: z.int().min(0).max(Number.MAX_SAFE_INTEGER) }),
  ])
  .meta({
    id: 'ClientMessage',
    description: 'A text message from the client: a call of any operation by name, a subscription, or an acknowledgement of stream bytes.',
  });
export type ClientMessage = z.infer<typeof ClientMessage>;

export const ServerMessage = z
  .discriminatedUnion('t', [
    z.object({ t: z.literal('result'), id: z.int(), result: z.unknown() }),
    z.object({ t: z.literal('error'), id: z.int().nullable(), error: ErrorBody.shape.error }),
    z.object({ t: z.literal('end'), sub: z.int(), offset: z.int().meta({ description: 'The stream ended here, after every data frame of it.' }) }),
    z.object({ t: z.literal('gap'), sub: z.int(), from: z.int(), to: z.int() }),
  ])
  .meta({ id: 'ServerMessage', description: 'A text message from the daemon. Stream bytes arrive as binary data frames.' });
export type ServerMessage = z.infer<typeof ServerMessage>;

/** Encodes a data frame. */
export function encodeDataFrame(sub: number, offset: number, payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(DATA_HEADER_BYTES + payload.length);
  frame[0] = DATA_FRAME;
  writeUint32(frame, 1, sub);
  // Offsets stay below 2^53: split into two 32-bit halves without BigInt, on the hot path.
  writeUint32(frame, 5, Math.floor(offset / 2 ** 32));
  writeUint32(frame, 9, offset >>> 0);
  frame.set(payload, DATA_HEADER_BYTES);
  return frame;
}

function writeUint32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = value >>> 24;
  bytes[at + 1] = (value >>> 16) & 0xff;
  bytes[at + 2] = (value >>> 8) & 0xff;
  bytes[at + 3] = value & 0xff;
}

function readUint32(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) >>> 0) + (bytes[at + 1]! << 16) + (bytes[at + 2]! << 8) + bytes[at + 3]!;
}

/** Decodes a data frame; throws on anything else. The payload is a view, not a copy. */
export function decodeDataFrame(frame: Uint8Array): { sub: number; offset: number; payload: Uint8Array } {
  if (frame.length < DATA_HEADER_BYTES) throw new RangeError(`data frame of ${frame.length} bytes is shorter than its header`);
  if (frame[0] !== DATA_FRAME) throw new RangeError(`unknown frame kind ${frame[0]}`);
  const high = readUint32(frame, 5);
  if (high >= 2 ** 21) throw new RangeError('data frame offset is out of range');
  return { sub: readUint32(frame, 1), offset: high * 2 ** 32 + readUint32(frame, 9), payload: frame.subarray(DATA_HEADER_BYTES) };
}

/** Base64url of a UTF-8 string, for the token subprotocol. */
export function base64url(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
