/**
 * The seam's shared rules behave the same whichever side calls them: each
 * side only chooses the error class a failed check throws.
 */
import { describe, expect, it } from 'vitest';
import { assertGraceMs, assertProgram, MAX_TIMER_DELAY_MS, retryableOnce, settleAll } from '@execworld/sdk/seam';

class SideError extends Error {
  readonly code = 'INVALID_ARGUMENT';
}
const invalid = (message: string): SideError => new SideError(message);

describe('spec checks', () => {
  it("throw the caller's error class with a message naming the field", () => {
    expect(() => assertProgram([], 'no program', invalid)).toThrow(SideError);
    expect(() => assertProgram(['/bin/echo', 7], 'no program', invalid)).toThrow('argv[1] must be a string');
    expect(() => assertProgram(['/bin/echo', 'a\0b'], 'no program', invalid)).toThrow('argv[1] must not contain a NUL character');
    expect(() => assertGraceMs(MAX_TIMER_DELAY_MS + 1, invalid)).toThrow(
      `graceMs must be a positive finite number no greater than ${MAX_TIMER_DELAY_MS}, got ${MAX_TIMER_DELAY_MS + 1}`,
    );
    expect(() => assertProgram(['/bin/echo', 'ok'], 'no program', invalid)).not.toThrow();
  });
});

describe('settleAll', () => {
  it('waits for every promise and answers nothing when none failed', async () => {
    let late = false;
    const slow = Promise.resolve().then(() => (late = true));
    await expect(settleAll([Promise.resolve(1), slow], 'teardown failed')).resolves.toBeUndefined();
    expect(late).toBe(true);
  });

  it('gives one failure as it is, and several as one AggregateError', async () => {
    const one = new Error('one');
    await expect(settleAll([Promise.resolve(), Promise.reject(one)], 'teardown failed')).resolves.toEqual({ error: one });
    const failure = await settleAll([Promise.reject(one), Promise.reject(new Error('two'))], 'teardown failed');
    expect(failure?.error).toBeInstanceOf(AggregateError);
    expect(failure?.error).toMatchObject({ message: 'teardown failed', errors: [one, new Error('two')] });
  });
});

describe('retryableOnce', () => {
  it('shares one run while it runs and after it succeeded, and runs again after a failure', async () => {
    let runs = 0;
    let fail = true;
    const action = retryableOnce(async () => {
      runs += 1;
      await Promise.resolve();
      if (fail) throw new Error(`run ${runs} failed`);
      return runs;
    });
    const first = action();
    expect(action()).toBe(first);
    await expect(first).rejects.toThrow('run 1 failed');
    fail = false;
    await expect(action()).resolves.toBe(2);
    await expect(action()).resolves.toBe(2);
    expect(runs).toBe(2);
  });
});
