/**
 * The daemon's error catalog: every code it answers with, its HTTP status and
 * what it means. Codes are only ever added; a retired code is never reused.
 * @module
 */
import { z } from 'zod';

export const ERROR_CATALOG = {
  INVALID_ARGUMENT: { status: 400, description: 'A request field is missing, of the wrong type or out of range; the message names it.' },
  UNAUTHORIZED: { status: 401, description: 'The bearer token is missing or wrong.' },
  FORBIDDEN_ORIGIN: { status: 403, description: 'A browser upgrade came from an origin that is not allowed.' },
  NOT_FOUND: { status: 404, description: 'No such route, or no such terminal or process for this owner.' },
  TERMINAL_EXITED: { status: 409, description: 'The terminal has exited; it takes no input, resize or signal.' },
  TERMINAL_CLOSED: { status: 409, description: "The terminal's program closed the terminal (its master is released); it takes no input or resize, though the program may still run." },
  PROCESS_EXITED: { status: 409, description: 'The process has exited, or its stdin is closed or not a pipe.' },
  NO_FOREGROUND_GROUP: { status: 409, description: 'The terminal has no foreground process group to signal.' },
  SIGNAL_REFUSED: { status: 409, description: "SIGKILL to a terminal's own shell group; terminate the terminal instead." },
  STREAM_NOT_AVAILABLE: { status: 409, description: 'The requested stream was not spawned in a mode that has it.' },
  CWD_NOT_FOUND: { status: 422, description: 'The working directory does not exist or is not a directory.' },
  EXECUTABLE_NOT_FOUND: { status: 422, description: 'The program is not an executable file, or is not on PATH.' },
  SPAWN_FAILED: { status: 422, description: 'The operating system refused to start the process.' },
  PAYLOAD_TOO_LARGE: { status: 413, description: 'The request body or a frame is larger than the configured limit.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, description: 'The request body is not JSON.' },
  LIMIT_EXCEEDED: {
    status: 429,
    description:
      'A configured bound was reached; the message names which: sessions, connections or subscriptions per owner, the daemon-wide collect budget, or input waiting for a program that does not read (retry once it reads).',
  },
  CLEANUP_FAILED: { status: 500, description: 'Processes of a session survived its cleanup; the message lists them.' },
  UNSUPPORTED: { status: 501, description: 'This platform cannot do what was asked.' },
  SHUTTING_DOWN: { status: 503, description: 'The daemon is shutting down and takes no new work.' },
  INTERNAL: { status: 500, description: 'A fault in the daemon itself.' },
} as const satisfies Record<string, { status: number; description: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export const ERROR_CODES = Object.keys(ERROR_CATALOG) as ErrorCode[];

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
    }),
  })
  .meta({ id: 'Error', description: 'Every error answer: a stable code and a message for people.' });

export type ErrorBody = z.infer<typeof ErrorBody>;
