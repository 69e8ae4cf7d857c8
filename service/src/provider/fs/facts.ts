/**
 * Small facts of the filesystem shared by the seam's primitives and the
 * transfer calls: a path made absolute, a version, a kind, an absence.
 * @module
 */
import type { BigIntStats } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { errnoOf, FsFailure } from './fs-error.ts';

/** `path` made absolute against `cwd`, or FS_NOT_FOUND saying why it cannot be. */
export function absolutePath(path: string, cwd: string | undefined): string {
  if (path.trim() === '') throw new FsFailure('FS_NOT_FOUND', 'the path must be a non-empty string');
  if (path.includes('\0')) throw new FsFailure('FS_NOT_FOUND', 'the path must not contain a NUL character');
  if (isAbsolute(path)) return resolve(path);
  if (cwd === undefined) throw new FsFailure('FS_NOT_FOUND', `"${path}" is relative, and no cwd was given to resolve it against`);
  if (!isAbsolute(cwd) || cwd.includes('\0')) throw new FsFailure('FS_NOT_FOUND', `the cwd "${cwd}" must be an absolute path`);
  return resolve(cwd, path);
}

/** A file's opaque version: device, inode, size, and nanosecond mtime and ctime. */
export function versionOf(info: BigIntStats): string {
  return [info.dev, info.ino, info.size, info.mtimeNs, info.ctimeNs].map((fact) => fact.toString(36)).join('-');
}

export function kindOf(info: BigIntStats): 'file' | 'directory' | 'other' {
  if (info.isFile()) return 'file';
  if (info.isDirectory()) return 'directory';
  return 'other';
}

/** Whether `error` says nothing is at the path (ENOENT, or a parent that is not a directory). */
export function isAbsence(error: unknown): boolean {
  const errno = errnoOf(error);
  return errno === 'ENOENT' || errno === 'ENOTDIR';
}
