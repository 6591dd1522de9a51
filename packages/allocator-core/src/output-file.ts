/**
 * The one writer of every file gpumem writes (reports, JSON results, traces, Perfetto traces).
 *
 * A file is written whole or not at all: into a new temporary file in the target's folder, synced,
 * then renamed over the target. So a failed write (a full disk, a signal) leaves the previous file
 * or none, a hard link's other names keep their bytes (the rename gives the target a new inode),
 * and a reader never sees half a file. Only regular files are replaced: a device, FIFO, socket or
 * folder is refused, never written through, so `--json /dev/full` cannot turn a device node into a
 * file. The one exception is the null device (/dev/null), which has nothing to lose and takes the
 * bytes as they come. A symbolic link is followed to the file it names, which is replaced (the
 * link stays); a link to nothing is refused. A replaced file keeps its permission bits (and, where
 * the process may, its owner); a new file gets 0666 less the umask. Every error is an
 * {@link OutputFileError} naming the file.
 * @module
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fsyncSync,
  lstatSync,
  openSync,
  readlinkSync,
  realpathSync,
  renameSync,
  type Stats,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { nonRegularFileKind } from './file-kind.js';

/** Writing an output file failed, or the path cannot be one. Nothing was left behind. */
export class OutputFileError extends Error {
  override readonly name = 'OutputFileError';
  readonly code = 'GPUMEM_OUTPUT_FILE';
  constructor(
    /** The path as given. */
    readonly path: string,
    /** What is wrong, without the path. */
    readonly reason: string,
    /** The system error's code (`ENOSPC`, `EACCES`, ...) when one caused it. */
    readonly errno?: string,
  ) {
    super(`cannot write ${JSON.stringify(path)}: ${reason}`);
  }
}

/** Throws an {@link OutputFileError} for a path that is not a non-empty string without NUL bytes. */
export function checkPathName(path: unknown): asserts path is string {
  if (typeof path !== 'string' || path === '')
    throw new OutputFileError(String(path), `expected a non-empty string for the file name but received ${typeof path}`);
  // The system would stop at the NUL and write to a shorter name than the one given.
  if (path.includes('\0')) throw new OutputFileError(path, 'the file name contains a NUL byte');
}

/**
 * What a file that is not regular is and what to give instead ('a folder; give a file name'), for
 * messages; undefined for a regular file.
 */
function refusalOf(st: Stats): string | undefined {
  const kind = nonRegularFileKind(st);
  if (kind === undefined) return undefined;
  if (st.isDirectory()) return `${kind}; give a file name`;
  if (st.isCharacterDevice()) return `${kind}; give a regular file (or leave the output out)`;
  return `${kind}; give a regular file`;
}

let nullDevice: number | undefined | null = null;

/** True for the null device, whatever its name (compared by device number with /dev/null). */
function isNullDevice(st: Stats): boolean {
  if (!st.isCharacterDevice()) return false;
  if (nullDevice === null) nullDevice = statSync('/dev/null', { throwIfNoEntry: false })?.rdev;
  return nullDevice !== undefined && st.rdev === nullDevice;
}

/** Where an output goes: the file to replace (with its status, if it exists), or the null device. */
export interface OutputTarget {
  /** The absolute path the temporary file is renamed to (a symbolic link's final file). */
  readonly path: string;
  /** The file there now; undefined for a new file. */
  readonly existing?: Stats;
  /** True for the null device: the bytes are dropped. */
  readonly discard: boolean;
}

function errnoOf(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException).code;
}

/**
 * Where writing `path` would go, or an {@link OutputFileError} saying why it cannot be written: a
 * device, FIFO, socket or folder (at the path or at the end of its symbolic links), a link to
 * nothing, or a folder that does not exist. Creates nothing.
 */
export function outputTarget(path: string): OutputTarget {
  checkPathName(path);
  const full = resolve(path);
  let st: Stats | undefined;
  try {
    st = lstatSync(full);
  } catch (e) {
    // a new file (ENOENT), or a parent that is a file (ENOTDIR): the folder check below says which
    if (errnoOf(e) !== 'ENOENT' && errnoOf(e) !== 'ENOTDIR') throw new OutputFileError(path, (e as Error).message, errnoOf(e));
  }
  let target = full;
  if (st?.isSymbolicLink()) {
    try {
      target = realpathSync(full);
    } catch {
      throw new OutputFileError(path, `is a symbolic link to ${readlinkSync(full)}, which does not exist; give the file itself`);
    }
    st = lstatSync(target);
  }
  if (st !== undefined) {
    if (isNullDevice(st)) return { path: target, existing: st, discard: true };
    const refusal = refusalOf(st);
    if (refusal !== undefined) throw new OutputFileError(path, `is ${refusal}`);
    return { path: target, existing: st, discard: false };
  }
  const folder = dirname(target);
  let folderStats: Stats | undefined;
  try {
    folderStats = statSync(folder);
  } catch (e) {
    throw new OutputFileError(
      path,
      errnoOf(e) === 'ENOTDIR' ? `a parent of ${folder} is a file, not a folder` : `the folder ${folder} does not exist`,
      errnoOf(e),
    );
  }
  if (!folderStats.isDirectory()) throw new OutputFileError(path, `${folder} is a file, not a folder`);
  return { path: target, discard: false };
}

/** Temporary files not yet renamed or removed: removed if the process exits first. */
const pending = new Set<string>();
let exitHookInstalled = false;

function removePendingAtExit(): void {
  for (const file of pending) {
    try {
      unlinkSync(file);
    } catch {
      // already gone
    }
  }
}

/**
 * An output file being written: bytes go to a temporary file beside the target; {@link commit}
 * syncs it and renames it over the target, {@link discard} removes it and leaves the target as it
 * was. A failed write discards and throws. Streaming writers (traces) write as they go and commit
 * at the end.
 */
export class OutputFile {
  private fd: number | undefined;
  private readonly temporary: string | undefined;
  private readonly target: OutputTarget;

  private constructor(
    /** The path as given, for messages. */
    readonly path: string,
  ) {
    this.target = outputTarget(path);
    if (this.target.discard) return;
    const folder = dirname(this.target.path);
    // O_EXCL: never an existing file, nor a symbolic link someone placed under this name.
    const name = join(folder, `.${basename(this.target.path)}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`);
    try {
      this.fd = openSync(name, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o666);
    } catch (e) {
      throw new OutputFileError(path, `cannot create a file in ${folder} (${(e as Error).message})`, errnoOf(e));
    }
    this.temporary = name;
    if (!exitHookInstalled) {
      process.on('exit', removePendingAtExit);
      exitHookInstalled = true;
    }
    pending.add(name);
    const existing = this.target.existing;
    if (existing !== undefined) {
      try {
        fchmodSync(this.fd, existing.mode & 0o7777);
        if (process.getuid?.() === 0) fchownSync(this.fd, existing.uid, existing.gid);
      } catch (e) {
        this.fail(e, 'cannot give the new file the mode of the one it replaces');
      }
    }
  }

  /** Opens `path` for writing (see the module's description). Throws {@link OutputFileError}. */
  static open(path: string): OutputFile {
    return new OutputFile(path);
  }

  /** Appends `data` (a string is written as UTF-8). Throws {@link OutputFileError}, the target untouched. */
  write(data: string | Uint8Array): void {
    if (this.target.discard) return;
    const fd = this.openFd();
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let offset = 0;
    try {
      while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    } catch (e) {
      this.fail(e, 'writing failed');
    }
  }

  /** Syncs the new file and renames it over the target. Throws {@link OutputFileError}, the target untouched. */
  commit(): void {
    if (this.target.discard) return;
    const fd = this.openFd();
    try {
      fsyncSync(fd);
      closeSync(fd);
      this.fd = undefined;
      // The target may have been swapped for a device or a folder since it was opened.
      const now = lstatSync(this.target.path, { throwIfNoEntry: false });
      const refusal = now === undefined ? undefined : refusalOf(now);
      if (refusal !== undefined) throw new OutputFileError(this.path, `is now ${refusal}`);
      renameSync(this.temporary!, this.target.path);
    } catch (e) {
      this.fail(e, 'completing the file failed');
    }
    pending.delete(this.temporary!);
    syncFolder(dirname(this.target.path));
  }

  /** Removes the temporary file; the target stays as it was. Safe to call more than once. */
  discard(): void {
    if (this.fd !== undefined) {
      try {
        closeSync(this.fd);
      } catch {
        // closing is best effort here: the file goes anyway
      }
      this.fd = undefined;
    }
    if (this.temporary !== undefined && pending.delete(this.temporary)) {
      try {
        unlinkSync(this.temporary);
      } catch {
        // already gone
      }
    }
  }

  private openFd(): number {
    if (this.fd === undefined) throw new OutputFileError(this.path, 'the file was already completed or discarded');
    return this.fd;
  }

  private fail(e: unknown, what: string): never {
    this.discard();
    if (e instanceof OutputFileError) throw e;
    const kept = this.target.existing !== undefined ? 'its previous content is kept' : 'nothing was written';
    throw new OutputFileError(this.path, `${what} (${(e as Error).message}); ${kept}`, errnoOf(e));
  }
}

/** Makes a rename durable: syncs the folder's entry list (best effort; some file systems refuse). */
function syncFolder(folder: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(folder, constants.O_RDONLY);
    fsyncSync(fd);
  } catch {
    // the rename is done; only its durability across a power cut is not guaranteed
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Writes `data` to `path` whole or not at all (see {@link OutputFile}). Throws {@link OutputFileError}. */
export function writeOutputFile(path: string, data: string | Uint8Array): void {
  const file = OutputFile.open(path);
  file.write(data);
  file.commit();
}

/**
 * True when `a` and `b` are the same file (device and inode, after symbolic links), so an output
 * that is an input is found whatever names or links lead to it. False when either does not exist.
 */
export function isSameFile(a: string, b: string): boolean {
  const status = (path: string) => {
    try {
      return statSync(resolve(path), { throwIfNoEntry: false });
    } catch {
      return undefined; // a parent that is a file, a NUL byte: not a file, so not this one
    }
  };
  const sa = status(a);
  const sb = status(b);
  return sa !== undefined && sb !== undefined && sa.dev === sb.dev && sa.ino === sb.ino;
}
