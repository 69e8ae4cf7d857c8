/**
 * The WebSocket protocol of `GET /v1/connect`: JSON text messages for calls,
 * subscriptions, acknowledgements and events; binary frames for stream data,
 * whose layout and codec are in codec.ts.
 * @module
 */
import { z } from 'zod';
import { ErrorBody } from './errors.ts';

export {
  base64url,
  DATA_FRAME,
  DATA_HEADER_BYTES,
  decodeDataFrame,
  encodeDataFrame,
  FORWARD_WINDOW_BYTES,
  WRITE_FRAME,
  WS_SUBPROTOCOL,
  WS_TOKEN_PROTOCOL_PREFIX,
} from './codec.ts';

export const StreamRef = z
  .strictObject({
    kind: z.enum(['terminal', 'process', 'forward']),
    id: z.string(),
    stream: z
      .enum(['output', 'stdout', 'stderr'])
      .meta({ description: "A terminal has 'output'; a process 'stdout' and 'stderr'; a port forward 'output', the bytes from the world." }),
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
    z.object({
      t: z.literal('end'),
      sub: z.int(),
      offset: z.int().meta({ description: 'The stream ended here, after every data frame of it.' }),
      reset: z.literal(true).optional().meta({ description: "A port forward's connection was reset (or cut) in the world rather than closed." }),
    }),
    z.object({ t: z.literal('gap'), sub: z.int(), from: z.int(), to: z.int() }),
    z.object({
      t: z.literal('written'),
      fwd: z.int(),
      offset: z.int().meta({ description: "Every byte of the forward's write frames before offset was taken by its connection in the world." }),
    }),
  ])
  .meta({ id: 'ServerMessage', description: 'A text message from the daemon. Stream bytes arrive as binary data frames.' });
export type ServerMessage = z.infer<typeof ServerMessage>;
