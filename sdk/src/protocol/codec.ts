/**
 * The bytes of the WebSocket protocol that need no schema: the subprotocol
 * names and the binary data frame's codec. Nothing here imports a library, so
 * a browser page can carry it without the schemas.
 *
 * A data frame is a 13-byte header and the payload:
 *   byte 0      kind (1 = data, from the daemon; 2 = write, from the client)
 *   bytes 1-4   subscription id (data) or forward id (write), uint32 big-endian
 *   bytes 5-12  byte offset of the payload's first byte, uint64 big-endian
 * A write frame carries bytes of a port forward to the world, at their offset
 * in that direction of the connection.
 * @module
 */
/** Subprotocol the daemon selects; clients must offer it. */
export const WS_SUBPROTOCOL = 'execworld.v1';
/** Prefix of the Kubernetes-style subprotocol that carries a bearer token for browsers. */
export const WS_TOKEN_PROTOCOL_PREFIX = 'base64url.bearer.authorization.k8s.io.';

export const DATA_FRAME = 1;
export const WRITE_FRAME = 2;
export const DATA_HEADER_BYTES = 13;
/**
 * A port forward's window each way: the most bytes the daemon sends from the
 * world beyond the client's ack, and the most the client sends to the world
 * beyond the daemon's `written`. Each side holds at most this much per forward
 * and direction, to send again after a reconnect.
 */
export const FORWARD_WINDOW_BYTES = 1024 * 1024;

/** Encodes a data frame (or, with `kind` WRITE_FRAME, a write frame: `sub` is then the forward's id). */
export function encodeDataFrame(sub: number, offset: number, payload: Uint8Array, kind = DATA_FRAME): Uint8Array {
  const frame = new Uint8Array(DATA_HEADER_BYTES + payload.length);
  frame[0] = kind;
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

/** Decodes a data frame (or a frame of `kind`); throws on anything else. The payload is a view, not a copy. */
export function decodeDataFrame(frame: Uint8Array, kind = DATA_FRAME): { sub: number; offset: number; payload: Uint8Array } {
  if (frame.length < DATA_HEADER_BYTES) throw new RangeError(`data frame of ${frame.length} bytes is shorter than its header`);
  if (frame[0] !== kind) throw new RangeError(`unknown frame kind ${frame[0]}`);
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
