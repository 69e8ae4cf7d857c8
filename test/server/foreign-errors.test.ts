/**
 * Errors of the families that have codes of their own (the provider's, the
 * file worker's, the shell engine's, a stream's offset) reach a client as
 * the catalog code each one's table names; a code no table lists, and a
 * `code` on an error of no known family, is INTERNAL, never passed on.
 */
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '@execworld/sdk';
import { ERROR_CATALOG, type ErrorCode } from '@execworld/sdk/protocol';
import { ShellError, type ShellErrorCode } from '@execworld/sdk/shell';
import { FsFailure, ProviderError, type ProviderErrorCode } from '../../service/src/provider/api.ts';
import { toServiceError } from '../../service/src/server/errors.ts';
import { OffsetOutOfRangeError } from '../../service/src/server/streams.ts';

const SHELL: readonly (readonly [ShellErrorCode, ErrorCode])[] = [
  ['SHELL_BUSY', 'SHELL_BUSY'],
  ['SHELL_START_FAILED', 'SHELL_START_FAILED'],
  ['CLOSED', 'NOT_FOUND'],
  ['ABORTED', 'INVALID_ARGUMENT'],
];

const FILES: readonly (readonly [FsFailure['code'], ErrorCode])[] = [
  ['FS_NOT_FOUND', 'FS_NOT_FOUND'],
  ['FS_NOT_DIRECTORY', 'FS_NOT_DIRECTORY'],
  ['FS_NOT_TEXT', 'FS_NOT_TEXT'],
  ['FS_NOT_REGULAR_FILE', 'FS_NOT_REGULAR_FILE'],
  ['FS_TOO_LARGE', 'FS_TOO_LARGE'],
  ['FS_PERMISSION_DENIED', 'FS_PERMISSION_DENIED'],
  ['FS_SANDBOX_DENIED', 'FS_PERMISSION_DENIED'],
  ['FS_IO_ERROR', 'FS_IO_ERROR'],
  ['FS_STALE_VERSION', 'FS_STALE_VERSION'],
  ['FS_NOT_OBSERVED', 'FS_NOT_OBSERVED'],
  ['FS_AMBIGUOUS_EDIT', 'FS_AMBIGUOUS_EDIT'],
  ['FS_EDIT_NOT_FOUND', 'FS_EDIT_NOT_FOUND'],
  ['FS_ABORTED', 'FS_ABORTED'],
  ['FS_ALREADY_EXISTS', 'FS_ALREADY_EXISTS'],
  ['FS_NOT_EMPTY', 'FS_NOT_EMPTY'],
  ['FS_CHECKSUM_MISMATCH', 'FS_CHECKSUM_MISMATCH'],
  ['UPLOAD_OFFSET_MISMATCH', 'UPLOAD_OFFSET_MISMATCH'],
];

const PROVIDER: readonly (readonly [ProviderErrorCode, ErrorCode])[] = [
  ['INVALID_ARGUMENT', 'INVALID_ARGUMENT'],
  ['ABORTED', 'INVALID_ARGUMENT'],
  ['CWD_NOT_FOUND', 'CWD_NOT_FOUND'],
  ['EXECUTABLE_NOT_FOUND', 'EXECUTABLE_NOT_FOUND'],
  ['TERMINAL_EXITED', 'TERMINAL_EXITED'],
  ['TERMINAL_CLOSED', 'TERMINAL_CLOSED'],
  ['LIMIT_EXCEEDED', 'LIMIT_EXCEEDED'],
  ['NO_FOREGROUND_GROUP', 'NO_FOREGROUND_GROUP'],
  ['SIGNAL_REFUSED', 'SIGNAL_REFUSED'],
  ['CLEANUP_FAILED', 'CLEANUP_FAILED'],
  ['UNSUPPORTED', 'UNSUPPORTED'],
];

/** What a client gets of `error`: its code, status and message. */
function answered(error: unknown): { code: ErrorCode; status: number; message: string } {
  const mapped = toServiceError(error);
  return { code: mapped.code, status: mapped.status, message: mapped.message };
}

describe('foreign error families map to the catalog through their tables', () => {
  it.each(SHELL)("the shell engine's %s is %s", (code, expected) => {
    expect(answered(new ShellError(code, 'said by the shell'))).toEqual({
      code: expected,
      status: ERROR_CATALOG[expected].status,
      message: 'said by the shell',
    });
  });

  it.each(FILES)("the file worker's %s is %s", (code, expected) => {
    const mapped = toServiceError(new FsFailure(code, 'said by the worker', { errno: 'EIO' }));
    expect({ code: mapped.code, message: mapped.message, errno: mapped.errno }).toEqual({ code: expected, message: 'said by the worker', errno: 'EIO' });
  });

  it.each(PROVIDER)("the provider's %s is %s", (code, expected) => {
    expect(answered(new ProviderError(code, 'said by the provider')).code).toBe(expected);
  });

  it("a read past a stream's end is INVALID_ARGUMENT, by its class", () => {
    expect(answered(new OffsetOutOfRangeError(10, 4))).toEqual({
      code: 'INVALID_ARGUMENT',
      status: 400,
      message: 'offset 10 is past the end of the stream (4)',
    });
  });

  it("the SDK's own refusal of an argument keeps its code", () => {
    expect(answered(new InvalidRequestError('INVALID_ARGUMENT', 'command must be a string')).code).toBe('INVALID_ARGUMENT');
  });

  it('a code no table lists is INTERNAL, not passed on', () => {
    // A worker of another version could answer a code this daemon does not know.
    expect(answered(new FsFailure('FS_FROM_THE_FUTURE' as FsFailure['code'], 'new'))).toEqual({ code: 'INTERNAL', status: 500, message: 'internal error' });
    expect(answered(new ShellError('SHELL_FROM_THE_FUTURE' as ShellErrorCode, 'new')).code).toBe('INTERNAL');
    expect(answered(new ProviderError('PROVIDER_FROM_THE_FUTURE' as ProviderErrorCode, 'new')).code).toBe('INTERNAL');
  });

  it('a code on an error of no known family is never read', () => {
    for (const code of ['INVALID_ARGUMENT', 'SHELL_BUSY', 'FS_NOT_FOUND', 'NOT_FOUND']) {
      expect(answered(Object.assign(new Error('anything'), { code })), code).toEqual({ code: 'INTERNAL', status: 500, message: 'internal error' });
    }
  });
});
