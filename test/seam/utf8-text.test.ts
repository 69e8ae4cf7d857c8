/**
 * The seam's whole-text rule (`utf8Text`) decides as a fatal TextDecoder
 * does, byte for byte, on what is and is not UTF-8, and drops a leading
 * byte-order mark as it does unless told to keep it.
 */
import { describe, expect, it } from 'vitest';
import { binaryHead, utf8Text } from '@execworld/sdk/fs';

const decoder = (bytes: Uint8Array): string | undefined => {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (_error) {
    return undefined;
  }
};

describe('utf8Text', () => {
  const cases: [string, number[]][] = [
    ['ASCII', [0x61, 0x62]],
    ['two, three and four byte characters', [0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80]],
    ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ['an overlong NUL', [0xc0, 0x80]],
    ['past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['a character cut short', [0x61, 0xe2, 0x82]],
    ['a stray continuation byte', [0x80]],
    ['0xFF', [0x61, 0xff]],
    ['a byte-order mark', [0xef, 0xbb, 0xbf, 0x61]],
    ['nothing', []],
  ];
  for (const [what, bytes] of cases) {
    it(`decides ${what} as a fatal TextDecoder does`, () => {
      expect(utf8Text(Uint8Array.from(bytes))).toBe(decoder(Uint8Array.from(bytes)));
    });
  }

  it('keeps a leading byte-order mark when told to, and only a leading one is ever dropped', () => {
    expect(utf8Text(Uint8Array.from([0xef, 0xbb, 0xbf, 0x61]), { keepByteOrderMark: true })).toBe('\uFEFFa');
    expect(utf8Text(Buffer.from('a\uFEFF'))).toBe('a\uFEFF');
  });

  it('reads a view into a larger buffer as the view', () => {
    const backing = Buffer.from('xxhello!yy');
    expect(utf8Text(backing.subarray(2, 8))).toBe('hello!');
  });
});

describe('binaryHead', () => {
  it('finds a NUL in the first 8 KiB only', () => {
    expect(binaryHead(Buffer.from('a\0b'))).toBe(true);
    expect(binaryHead(Buffer.concat([Buffer.alloc(8192, 0x61), Buffer.from([0])]))).toBe(false);
  });
});
