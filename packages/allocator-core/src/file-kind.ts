/**
 * What a path that is not a regular file is, in the words every message of gpumem uses for it
 * (the output files, trace inputs and plug-in files of Node.js; native/src/core/file_kind.hpp says
 * the same for the native code).
 * @module
 */
import type { Stats } from 'node:fs';

/** The methods of `fs.Stats` that tell the kinds of file apart. */
export type FileKindStats = Pick<Stats, 'isFile' | 'isDirectory' | 'isFIFO' | 'isSocket' | 'isCharacterDevice' | 'isBlockDevice'>;

/**
 * 'a folder', 'a named pipe (FIFO)', 'a socket', 'a character device', 'a block device', or 'not a
 * regular file' for any other kind; undefined for a regular file.
 */
export function nonRegularFileKind(stats: FileKindStats): string | undefined {
  if (stats.isFile()) return undefined;
  if (stats.isDirectory()) return 'a folder';
  if (stats.isFIFO()) return 'a named pipe (FIFO)';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  return 'not a regular file';
}
