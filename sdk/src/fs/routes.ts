/**
 * The daemon's byte routes for files, beside the operation table's JSON
 * calls: a file's content, an upload's bytes, a directory as a tar stream.
 * @module
 */

/** `GET`: a file's bytes from an offset. */
export const CONTENT_PATH = '/v1/files/content';
/** `POST` begins an upload; `PUT {UPLOADS_PATH}/{id}?offset=N` sends its bytes. */
export const UPLOADS_PATH = '/v1/files/uploads';
/** `GET` packs a directory as a tar stream; `PUT` unpacks one into a directory. */
export const ARCHIVE_PATH = '/v1/files/archive';
/** The version and size of the file a content answer streams. */
export const VERSION_HEADER = 'x-execworld-version';
export const SIZE_HEADER = 'x-execworld-size';
/** The trailer of a whole-file content answer asked for with `digest=sha256`: the SHA-256 of the bytes sent. */
export const DIGEST_TRAILER = 'x-execworld-sha256';
/**
 * The trailer of an archive answer: the special files (sockets, FIFOs,
 * devices) the archive leaves out, as `{"count":N,"entries":[{"path","kind"},…]}`
 * in ASCII JSON, listing as many as fit in 8 KiB (see `skippedTrailer`).
 */
export const SKIPPED_TRAILER = 'x-execworld-skipped';
