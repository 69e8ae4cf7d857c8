/**
 * The daemon's error catalog: every code it answers with, its HTTP status and
 * what it means. Codes are only ever added; a retired code is never reused.
 * @module
 */
import { z } from 'zod';

export const ERROR_CATALOG = {
  INVALID_ARGUMENT: {
    status: 400,
    description:
      'A request field is missing, of the wrong type or out of range (the message names it), or the request is not valid HTTP or not a valid WebSocket handshake (an upgrade of any path but /v1/connect among them).',
  },
  UNAUTHORIZED: { status: 401, description: 'The bearer token is missing or wrong, or a minted token expired or was revoked.' },
  FORBIDDEN_ORIGIN: { status: 403, description: 'A browser upgrade, or a request to /mcp, came from an origin that is not allowed.' },
  NOT_FOUND: { status: 404, description: 'No such route or operation, or no terminal or process of this owner by that id, whatever its shape.' },
  TERMINAL_EXITED: { status: 409, description: 'The terminal has exited; it takes no input, resize or signal.' },
  TERMINAL_CLOSED: {
    status: 409,
    description: "The terminal's program closed the terminal (its master is released); it takes no input or resize, though the program may still run.",
  },
  PROCESS_EXITED: { status: 409, description: 'The process has exited, or its stdin is closed or not a pipe.' },
  NO_FOREGROUND_GROUP: { status: 409, description: 'The terminal has no foreground process group to signal, or it exited before the signal reached it.' },
  SIGNAL_REFUSED: { status: 409, description: "SIGKILL to a terminal's own shell group; terminate the terminal instead." },
  SHELL_BUSY: {
    status: 409,
    description: 'The shell is running a command (or another call): a run that waits for input takes send, wait or interrupt, never a new command.',
  },
  STREAM_NOT_AVAILABLE: { status: 409, description: 'The requested stream was not spawned in a mode that has it.' },
  CWD_NOT_FOUND: { status: 422, description: 'The working directory does not exist or is not a directory.' },
  EXECUTABLE_NOT_FOUND: {
    status: 422,
    description: 'The program is not an executable file, or is not on PATH (errno ENOENT, or EACCES for a file without execute permission).',
  },
  SPAWN_FAILED: {
    status: 422,
    description: 'The operating system refused to start the process; errno says why (E2BIG: argv and environment too large for exec).',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    description:
      'The request body is larger than its call takes (the message says how much: 64 KiB for ids, paths and options, 8 MiB for a program or its input, --max-body-bytes for data), or a frame than the configured limit.',
  },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, description: 'The request body is not of a type the route takes: JSON, or bytes on the byte routes of files.' },
  SHELL_START_FAILED: { status: 422, description: 'The shell did not get ready: it exited while starting, or did not answer within its start timeout.' },
  LIMIT_EXCEEDED: {
    status: 429,
    description:
      'A configured bound was reached; the message names which. Per owner: its running terminals and processes, shells, ' +
      "WebSocket connections, HTTP requests in flight, its previews' requests and WebSockets in flight, subscriptions, open uploads, creates with a requestId under way, MCP tasks held, minted tokens that are good, port forwards open, or the pids all its sessions hold together (a create whose fork the kernel refused). " +
      'On one connection: calls in flight, subscriptions, or bytes written to a port forward past its window (and, in the SDK, calls waiting for an answer or subscriptions open ' +
      "on the client's side). Daemon-wide, with each owner held to at most half of each: the collect budget, the budget of request bodies, " +
      'or the budget of answers being read and sent (retry once other requests are done). Input waiting for a program that does not read (retry once it reads); the cells of a terminal screen; ' +
      "an MCP task's answer larger than a task keeps (read the output with output_read).",
  },
  CLEANUP_FAILED: { status: 500, description: 'Processes of a session survived its cleanup; the message lists them.' },
  UNSUPPORTED: {
    status: 501,
    description:
      'This daemon cannot do what was asked (the message says what): terminals on a Windows host without a pseudoconsole, ' +
      'a signal a Windows terminal has no counterpart for, another OS user where the host cannot switch to one, or an inspection the host cannot make.',
  },
  SHUTTING_DOWN: { status: 503, description: 'The daemon is shutting down and takes no new work.' },
  INTERNAL: { status: 500, description: 'A fault in the daemon itself.' },
  URI_TOO_LONG: { status: 414, description: 'A path segment (an id, say) is longer than 100 characters.' },
  HEADERS_TOO_LARGE: {
    status: 431,
    description:
      "The request line and headers together exceed Node's limit of 16 KiB; a URL that long is answered so too, as Node's parser counts it with the headers.",
  },
  CLIENT_TIMEOUT: {
    status: 408,
    description:
      "The request's headers did not all arrive within 60 s (or the request timeout, --request-timeout-ms, when shorter), or its body not within the request timeout: a body taken whole (JSON) in all, a streamed one (upload bytes, an archive to unpack) from one byte to the next.",
  },
  UPGRADE_REQUIRED: { status: 426, description: 'GET /v1/connect without a WebSocket upgrade.' },
  FS_NOT_FOUND: {
    status: 404,
    description: 'The file or directory does not exist, a parent of the path is not a directory, or the path is empty or relative without a cwd.',
  },
  FS_NOT_DIRECTORY: { status: 409, description: 'A listing was asked of something that is not a directory.' },
  FS_NOT_REGULAR_FILE: { status: 409, description: 'A read or write was asked of something that is not a regular file (a directory, a device, a FIFO).' },
  FS_NOT_TEXT: { status: 422, description: 'The file is not text: not valid UTF-8, or a NUL byte in its first 8 KiB (anywhere, for an edit).' },
  FS_TOO_LARGE: {
    status: 422,
    description:
      "The file is larger than the read's maxBytes, or than what one answer may hold (the message says which); a directory has more entries than one listing answers.",
  },
  FS_PERMISSION_DENIED: { status: 403, description: "The operating system refused access, or the path leads outside the owner's root." },
  FS_IO_ERROR: { status: 500, description: 'The operating system failed the operation for another reason; errno says which.' },
  FS_STALE_VERSION: { status: 409, description: 'The file changed (or is gone) since the version the write or edit was guarded with.' },
  FS_NOT_OBSERVED: { status: 409, description: 'A create-if-absent write found the file already there.' },
  FS_AMBIGUOUS_EDIT: { status: 422, description: 'The edit text occurs more than once and replaceAll was not set.' },
  FS_EDIT_NOT_FOUND: { status: 422, description: 'The edit text is empty or does not occur in the file.' },
  FS_ABORTED: {
    status: 409,
    description:
      'The caller cancelled the operation before it took effect: the SDK raises it for an aborted signal; the daemon stops the work of a caller that went away, who gets no answer.',
  },
  FS_ALREADY_EXISTS: {
    status: 409,
    description: 'Something is already at the path and the call may not replace it (a rename or upload without overwrite, a mkdir onto a file).',
  },
  FS_NOT_EMPTY: {
    status: 409,
    description: 'A directory to remove has entries and recursive was not set, or a rename would replace a directory that has entries.',
  },
  FS_CHECKSUM_MISMATCH: {
    status: 422,
    description: 'An upload is not what its sender said it would be: its size or SHA-256 differs. Nothing was published; the upload can be resumed or deleted.',
  },
  UPLOAD_OFFSET_MISMATCH: {
    status: 409,
    description: "Bytes were sent for an offset other than the upload's end (the message says where it is): resume from the upload's offset.",
  },
  READ_ONLY: {
    status: 403,
    description:
      "The token may only read (access=read in the token file): it may list, inspect and watch the owner's sessions and files, not act on them. Nothing was done.",
  },
  USER_NOT_ALLOWED: {
    status: 403,
    description:
      'A create named an OS user (user) its owner may not run as: an owner mapped to an OS user (user= in the token file) may name only that user, and an owner that is not may name another user only when the daemon runs as root. Nothing was started.',
  },
  TOKEN_SCOPE: {
    status: 403,
    description:
      'The token is a minted one whose scope does not reach what was asked: a token of one session acts on that session only (no other, no create, no files), a token of one port reaches that port only (its forward and preview, no other operation), and a minted token mints, lists and revokes no tokens. Nothing was done.',
  },
  PORT_REFUSED: {
    status: 502,
    description:
      'The connection to the port in the world failed: nothing accepted it (errno says why: ECONNREFUSED when nothing listens on it), ' +
      'or the app closed it before it answered a preview. A port forward resets the local connection it was for; a preview answers 502.',
  },
} as const satisfies Record<string, { status: number; description: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export const ERROR_CODES = Object.keys(ERROR_CATALOG) as ErrorCode[];

/** What went wrong: a code of the catalog, a message for people, and the errno when the operating system gave one. */
export const ErrorDetail = z
  .object({
    code: z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]),
    message: z.string(),
    errno: z
      .string()
      .optional()
      .meta({ description: "The operating system's name for the failure (ENOENT, EACCES, E2BIG, ...) when it reported one; spawn failures carry it." }),
  })
  .meta({
    id: 'ErrorDetail',
    description: 'A stable code from the error catalog, a message for people, and the errno when the operating system reported one.',
  });

export const ErrorBody = z.object({ error: ErrorDetail }).meta({ id: 'Error', description: 'Every error answer: a stable code and a message for people.' });

export type ErrorBody = z.infer<typeof ErrorBody>;
