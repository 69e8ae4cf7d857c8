/**
 * The detach key sequence, Ctrl-P Ctrl-Q, as it arrives from a terminal in
 * raw mode: in one read or split across two, and a Ctrl-P that starts no
 * sequence reaching the program with the key after it.
 */
import { describe, expect, it } from 'vitest';
import { DetachKeys } from '../../service/src/cli/interactive.ts';

const P = '\x10';
const Q = '\x11';

function feed(keys: DetachKeys, text: string): { send: string; detach: boolean } {
  const { send, detach } = keys.feed(Buffer.from(text, 'latin1'));
  return { send: send.toString('latin1'), detach };
}

describe('DetachKeys', () => {
  it('passes input without Ctrl-P through as it is', () => {
    expect(feed(new DetachKeys(), 'ls -l\r')).toEqual({ send: 'ls -l\r', detach: false });
  });

  it('detaches on Ctrl-P Ctrl-Q, sending what came before and dropping what came after', () => {
    expect(feed(new DetachKeys(), `echo${P}${Q}rest`)).toEqual({ send: 'echo', detach: true });
  });

  it('detaches on a Ctrl-P and a Ctrl-Q that arrive in two reads', () => {
    const keys = new DetachKeys();
    expect(feed(keys, `a${P}`)).toEqual({ send: 'a', detach: false });
    expect(feed(keys, Q)).toEqual({ send: '', detach: true });
  });

  it('sends a Ctrl-P that starts no sequence with the key after it, even in the next read', () => {
    const keys = new DetachKeys();
    expect(feed(keys, `${P}x`)).toEqual({ send: `${P}x`, detach: false });
    expect(feed(keys, P)).toEqual({ send: '', detach: false });
    expect(feed(keys, `${P}${Q}`)).toEqual({ send: P, detach: true });
  });

  it('gives back a Ctrl-P still held at the end of input', () => {
    const keys = new DetachKeys();
    feed(keys, `y${P}`);
    expect(keys.flush().toString('latin1')).toBe(P);
    expect(keys.flush().length).toBe(0);
  });
});
