/**
 * What a port forward and a preview share when they reach a port in the
 * world: who may (permitsPort, refused as READ_ONLY or TOKEN_SCOPE) and what
 * a connection that failed answers (PORT_REFUSED with the errno).
 * @module
 */
import { PortConnectError } from '../provider/api.ts';
import { permitsPort, type Principal } from './auth.ts';
import { scopeRefusal, ServiceError, toServiceError } from './errors.ts';

/** Why `principal` may not reach `port`, or undefined when it may. */
export function portRefusal(principal: Principal, port: number): ServiceError | undefined {
  if (permitsPort(principal, port)) return undefined;
  if (principal.minted?.port !== undefined) return scopeRefusal(`the token reaches port ${principal.minted.port} only, not port ${port}`);
  if (principal.minted?.session !== undefined) return scopeRefusal(`the token acts on session ${principal.minted.session} only, not on a port`);
  return new ServiceError('READ_ONLY', `the token may only read: reaching port ${port} in the world takes a write token, or one scoped to that port`);
}

/** PORT_REFUSED for a connection to `port` that could not be made, with its errno; anything else as the catalog maps it. */
export function connectFailure(port: number, error: unknown): ServiceError {
  if (!(error instanceof PortConnectError)) return toServiceError(error);
  const message = error.errno === 'ECONNREFUSED' ? `nothing listens on port ${port} in the world` : `port ${port} in the world: ${error.message}`;
  return new ServiceError('PORT_REFUSED', message, { errno: error.errno, cause: error });
}
