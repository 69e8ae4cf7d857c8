/**
 * The seam's constants are the same as @deepseek-ai/dsh-subprocess's (its
 * types are compared in types.test-d.ts).
 */
import { DSH_ENV_PREFIX as THEIR_PREFIX } from '@deepseek-ai/dsh-subprocess';
import { describe, expect, it } from 'vitest';
import { DSH_ENV_PREFIX, SENSITIVE_ENV_PATTERN } from '@execworld/sdk/seam';

describe('seam constants', () => {
  it('share the constants', () => {
    expect(DSH_ENV_PREFIX).toBe(THEIR_PREFIX);
    expect(SENSITIVE_ENV_PATTERN.source).toBe('KEY|PASSWORD|SECRET|TOKEN');
    expect(SENSITIVE_ENV_PATTERN.flags).toBe('i');
  });
});
