/**
 * The check of a byte route's documented error codes: each scenario answers
 * its code with the catalog's status, and the route documents no code that
 * no scenario brings about but the ones named as undrivable.
 */
import { expect } from 'vitest';
import { ERROR_CATALOG, type ErrorCode } from '@execworld/sdk/protocol';

export interface CodedAnswer {
  readonly status: number;
  readonly bytes: Buffer;
  readonly error: { readonly code: ErrorCode } | undefined;
}

export async function expectDocumentedCodes(
  scenarios: readonly (readonly [ErrorCode, () => Promise<CodedAnswer>])[],
  documented: readonly ErrorCode[],
  undrivable: readonly ErrorCode[],
): Promise<void> {
  for (const [code, send] of scenarios) {
    const answer = await send();
    expect(answer.error?.code, `${code}: ${answer.bytes.toString('utf8').slice(0, 200)}`).toBe(code);
    expect(answer.status).toBe(ERROR_CATALOG[code].status);
  }
  const driven = new Set(scenarios.map(([code]) => code));
  expect(documented.filter((code) => !driven.has(code)).sort()).toEqual([...undrivable].sort());
}
