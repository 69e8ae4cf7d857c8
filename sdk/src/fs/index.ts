/**
 * @execworld/sdk/fs: the filesystem seam's vocabulary (`ctx.fs`), and the
 * remote provider that serves it from a daemon's world.
 * @module @execworld/sdk/fs
 */
export { FS_ERROR_CODES, isFsErrorCode } from './types.ts';
export type {
  FsDirEntry,
  FsEditOutcome,
  FsEditRequest,
  FsErrorCode,
  FsInfo,
  FsPathInfo,
  FsProvider,
  FsResolveOptions,
  FsTarget,
  FsWriteIntent,
  FsWriteOutcome,
} from './types.ts';
export { BINARY_SAMPLE_BYTES, binaryHead, TextStreamDecoder, toLf, utf8Text } from './text-stream.ts';
export type { NotTextReason } from './text-stream.ts';
export { RemoteFiles } from './remote-files.ts';
export { ARCHIVE_PATH, CONTENT_PATH, DIGEST_TRAILER, SIZE_HEADER, SKIPPED_TRAILER, UPLOADS_PATH, VERSION_HEADER } from './routes.ts';
export type { RemoteFilesOptions } from './remote-files.ts';
export { RemoteTransfer } from './transfer.ts';
export type { CopyOptions, FileDigest, RemoteTransferOptions, TransferProgress, UploadOptions } from './transfer.ts';
export { MAX_SKIPPED_LISTED, packArchive, parseSkippedTrailer, skippedTrailer, skippedWarnings, unpackArchive } from './archive.ts';
export type { ArchiveResult, PackedArchive, PackOptions, PackSkips, SkippedKind, UnpackOptions } from './archive.ts';
