/**
 * Finding what an id names: a terminal, a process or a shell of this token's owner.
 * @module
 */
import { isExecworldError, NotFoundError, type RemoteRuntime } from '@execworld/sdk';
import type { OperationResult } from '@execworld/sdk/protocol';

export type TerminalInfo = OperationResult<'terminal.get'>;
export type ProcessInfo = OperationResult<'process.get'>;
export type ShellInfo = OperationResult<'shell.get'>;
export type Session =
  | { readonly kind: 'terminal'; readonly info: TerminalInfo }
  | { readonly kind: 'process'; readonly info: ProcessInfo }
  | { readonly kind: 'shell'; readonly info: ShellInfo };

const isNotFound = (error: unknown): boolean => isExecworldError(error) && error.code === 'NOT_FOUND';

/**
 * The terminal, process or shell `id` names. Ids are opaque: the shape of one
 * only decides which kind is asked for first.
 * @throws {NotFoundError} NOT_FOUND when it names none
 */
export async function findSession(runtime: RemoteRuntime, id: string): Promise<Session> {
  const lookups = {
    t: async (): Promise<Session> => ({ kind: 'terminal', info: await runtime.call('terminal.get', { id }) }),
    p: async (): Promise<Session> => ({ kind: 'process', info: await runtime.call('process.get', { id }) }),
    s: async (): Promise<Session> => ({ kind: 'shell', info: await runtime.call('shell.get', { id }) }),
  };
  const first = id.startsWith('p_') ? 'p' : id.startsWith('s_') ? 's' : 't';
  const order = [lookups[first], ...Object.entries(lookups).flatMap(([key, lookup]) => (key === first ? [] : [lookup]))];
  for (const lookup of order) {
    try {
      return await lookup();
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }
  throw new NotFoundError('NOT_FOUND', `no terminal, process or shell ${id}`, 404);
}
