/**
 * The execworld wire protocol: schemas, operations, frames, error codes.
 * Runtime-neutral: no node: imports.
 * @module @execworld/sdk/protocol
 */
export { ERROR_CATALOG, ERROR_CODES, ErrorBody, ErrorDetail } from './errors.ts';
export type { ErrorCode } from './errors.ts';
export { BODY_LIMITS, OPERATION_LIST, OPERATIONS, isIdempotentCall } from './operations.ts';
export type {
  Access,
  BodyKind,
  ByteAnswer,
  ByteCarriage,
  ByteMediaType,
  Idempotency,
  OperationInput,
  OperationName,
  CallName,
  OperationParams,
  OperationResult,
  OperationSpec,
  Operations,
} from './operations.ts';
export * as schemas from './schemas.ts';
export {
  ClientMessage,
  DATA_FRAME,
  DATA_HEADER_BYTES,
  FORWARD_WINDOW_BYTES,
  ServerMessage,
  StreamRef,
  SubscribeParams,
  SubscribeResult,
  WS_SUBPROTOCOL,
  WRITE_FRAME,
  WS_TOKEN_PROTOCOL_PREFIX,
  base64url,
  decodeDataFrame,
  encodeDataFrame,
} from './frames.ts';
export { PROTOCOL_VERSION } from './version.ts';
export { LIVE_PATH, METRICS_PATH, READY_PATH, TOKEN_HEADER, UI_PATH } from './http.ts';
