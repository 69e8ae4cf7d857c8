/**
 * The binary data frame: a kind byte, a 32-bit subscription and a 64-bit byte
 * offset split in two 32-bit halves, then the payload. Offsets are exact up to
 * 2^53 - 1, across the 2^32 boundary where a 32-bit slip would hide.
 */
import { describe, expect, it } from 'vitest';
import { DATA_HEADER_BYTES, decodeDataFrame, encodeDataFrame } from '@execworld/sdk/protocol';

describe('data frames', () => {
  it.each([
    [1, 0],
    [2, 1],
    [0xffff_ffff, 2 ** 32 - 1],
    [7, 2 ** 32],
    [7, 2 ** 32 + 1],
    [42, 5 * 2 ** 32 + 123_456],
    [3, Number.MAX_SAFE_INTEGER],
  ])('carry subscription %i and offset %i exactly', (sub, offset) => {
    const payload = new Uint8Array([0, 1, 254, 255]);
    const frame = encodeDataFrame(sub, offset, payload);
    expect(frame.length).toBe(DATA_HEADER_BYTES + payload.length);
    const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
    // The header on the wire: big-endian, the offset as one 64-bit number.
    expect(view.getUint32(1)).toBe(sub);
    expect(view.getBigUint64(5)).toBe(BigInt(offset));
    const decoded = decodeDataFrame(frame);
    expect(decoded).toMatchObject({ sub, offset });
    expect([...decoded.payload]).toEqual([...payload]);
  });

  it('refuses a frame shorter than its header, of an unknown kind, or with an offset past 2^53', () => {
    expect(() => decodeDataFrame(new Uint8Array(DATA_HEADER_BYTES - 1))).toThrow(/shorter than its header/);
    const frame = encodeDataFrame(1, 0, new Uint8Array(0));
    frame[0] = 0x7f;
    expect(() => decodeDataFrame(frame)).toThrow(/unknown frame kind/);
    const far = encodeDataFrame(1, 0, new Uint8Array(0));
    new DataView(far.buffer).setBigUint64(5, 2n ** 53n);
    expect(() => decodeDataFrame(far)).toThrow(/out of range/);
  });
});
