/**
 * Finding what an id names: a terminal or a process of this token's owner.
 * @module
 */
import { isExecworldError, NotFoundError, type RemoteRuntime } from '@execworld/sdk';
import type { OperationResult } from '@execworld/sdk/protocol';

export type TerminalInfo = OperationResult<'terminal.get'>;
export type ProcessInfo = OperationResult<'process.get'>;
export type Session = { readonly kind: 'terminal'; readonly info: TerminalInfo } | { readonly kind: 'process'; readonly info: ProcessInfo };

const isNotFound = (error: unknown): boolean => isExecworldError(error) && error.code === 'NOT_FOUND';

/**
 * The terminal or process `id` names. Ids are opaque: the shape of one only
 * decides which kind is asked for first.
 * @throws {NotFoundError} NOT_FOUND when it names neither
 */
export async function findSession(runtime: RemoteRuntime, id: string): Promise<Session> {
  const lookups = [
    async (): Promise<Session> => ({ kind: 'terminal', info: await runtime.call('terminal.get', { id }) }),
    async (): Promise<Session> => ({ kind: 'process', info: await runtime.call('process.get', { id }) }),
  ];
  if (id.startsWith('p_')) lookups.reverse();
  for (const lookup of lookups) {
    try {
      return await lookup();
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }
  throw new NotFoundError('NOT_FOUND', `no terminal or process ${id}`, 404);
}
