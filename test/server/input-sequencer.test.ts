/**
 * The writers' sequence numbers a takeover hands to the next image: only the
 * writes applied whole are known there, so a retry of one under way or failed
 * is applied, and a retry of one applied is not.
 */
import { describe, expect, it } from 'vitest';
import { InputSequencer } from '../../service/src/server/input-sequencer.ts';

describe('InputSequencer snapshot and restore', () => {
  it('keeps the writes applied, not one under way or one that failed', async () => {
    const sequencer = new InputSequencer();
    await sequencer.run('w', 1, () => Promise.resolve());
    await expect(sequencer.run('w', 2, () => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
    let finish!: () => void;
    const underWay = sequencer.run('w', 3, () => new Promise<void>((resolve) => (finish = resolve)));
    const snapshot = sequencer.snapshot();
    expect(snapshot).toEqual([{ writer: 'w', last: 3, recent: [1] }]);
    finish();
    await underWay;

    const next = new InputSequencer();
    next.restore(snapshot);
    const applied: number[] = [];
    const answers: boolean[] = [];
    for (const seq of [1, 2, 3]) answers.push(await next.run('w', seq, () => Promise.resolve(void applied.push(seq))));
    expect(answers).toEqual([false, true, true]);
    expect(applied).toEqual([2, 3]);
  });
});
