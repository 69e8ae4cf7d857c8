/** The cursor tracker of terminal-replies.ts: where it puts the cursor, and which bytes are a cursor position request. */
import { describe, expect, it } from 'vitest';
import { CursorTracker } from './terminal-replies.ts';

const feed = (tracker: CursorTracker, text: string): number => tracker.feed(Buffer.from(text));

describe('CursorTracker', () => {
  it('counts printable characters, not escape sequences, and finds a request split across chunks', () => {
    const tracker = new CursorTracker(80, 24);
    expect(feed(tracker, 'PS /tmp> \x1b[0m\x1b[93mab\x1b]133;D;0\x07é')).toBe(0);
    expect(tracker.report()).toBe('\x1b[1;13R');
    expect(feed(tracker, 'x\x1b[')).toBe(0);
    expect(feed(tracker, '6')).toBe(0);
    expect(feed(tracker, 'n')).toBe(1);
    expect(tracker.report()).toBe('\x1b[1;14R');
  });

  it('follows line breaks, carriage returns, backspaces, wrapping, the bottom row and absolute moves', () => {
    const tracker = new CursorTracker(10, 3);
    feed(tracker, 'abc\r\nde\b');
    expect(tracker.report()).toBe('\x1b[2;2R');
    feed(tracker, '\n\n\n\r0123456789x');
    expect(tracker.report()).toBe('\x1b[3;2R');
    feed(tracker, '\x1b[2;5H');
    expect(tracker.report()).toBe('\x1b[2;5R');
    expect(feed(tracker, '\x1b[6n\x1b[6n')).toBe(2);
  });
});
