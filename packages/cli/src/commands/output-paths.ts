/**
 * Output files are checked before any work: a run of several minutes must not end in ENOENT or
 * EACCES, nor overwrite its own input or another output of the same run. They are written whole or
 * not at all: a full disk leaves the previous file (or none), never a truncated one.
 * @module
 */
import {
  accessSync,
  constants,
  existsSync,
  lstatSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { UsageError } from './args.js';

/** The output path that means standard output: the JSON goes there and every status line to stderr. */
const stdoutPath = '-';

/** True when `path` names standard output (`-`, or /dev/stdout, which a status line would corrupt). */
export function isStdout(path: unknown): boolean {
  return path === stdoutPath || path === '/dev/stdout';
}

/** The kind of a file that is not a regular file or a folder, for messages; undefined for those two. */
function specialKind(st: Stats): string | undefined {
  if (st.isFIFO()) return 'a named pipe (FIFO): writing would block until something reads it';
  if (st.isSocket()) return 'a socket';
  if (st.isBlockDevice()) return 'a block device';
  return undefined;
}

/** True for a path on a kernel file system (/proc, /sys), whose files take no reports. */
function isKernelPath(full: string): boolean {
  return /^\/(?:proc|sys)(?:\/|$)/.test(full);
}

/**
 * Throws a UsageError naming `flag` when `path` cannot be written: its folder is missing, not a
 * folder or not writable, the path is a folder, a dangling symbolic link, a FIFO, socket or block
 * device, lies in /proc or /sys, or it is an existing file that cannot be written. Nothing is
 * created. (Character devices such as /dev/null are accepted.)
 */
function checkOutputPath(command: string, flag: string, path: string): void {
  if (isStdout(path)) return;
  const refuse = (why: string): never => {
    throw new UsageError(`gpumem ${command}: '--${flag}' ${path}: ${why}`);
  };
  const full = resolve(path);
  let link: Stats | undefined;
  try {
    link = lstatSync(full);
  } catch {
    // a new file: its folder is checked below
  }
  let target: Stats | undefined;
  if (link?.isSymbolicLink()) {
    try {
      target = statSync(full);
    } catch {
      refuse(`is a symbolic link to ${readlinkSync(full)}, which does not exist; give the file itself`);
    }
  } else target = link;
  const real = target ? realpathSync(full) : full;
  if (isKernelPath(real)) refuse(`is on a kernel file system (${real}); give a file on a disk`);
  if (target?.isDirectory()) refuse('is a folder; give a file name');
  if (target) {
    const special = specialKind(target);
    if (special) refuse(`is ${special}; give a regular file`);
    try {
      accessSync(full, constants.W_OK);
    } catch {
      refuse('the file exists and cannot be written (read-only?)');
    }
    return;
  }
  const folder = dirname(full);
  let folderStats: Stats | undefined;
  try {
    folderStats = statSync(folder);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    refuse(code === 'ENOTDIR' ? `a parent of ${folder} is a file, not a folder` : `the folder ${folder} does not exist`);
  }
  if (!folderStats!.isDirectory()) refuse(`${folder} is a file, not a folder`);
  try {
    accessSync(folder, constants.W_OK);
  } catch {
    refuse(`cannot write in ${folder}`);
  }
}

/**
 * One file as the file system sees it: its device and inode where it exists (so a hard link and a
 * symbolic link name the file they lead to), else its absolute path.
 */
function identity(path: string): string {
  const full = resolve(path);
  try {
    const st = statSync(full);
    return `${st.dev}:${st.ino}`;
  } catch {
    return full;
  }
}

function isCharacterDevice(path: string): boolean {
  try {
    return statSync(resolve(path)).isCharacterDevice();
  } catch {
    return false;
  }
}

/** The plug-ins named by `--plugin` and GPUMEM_PLUGINS that are files here: inputs an output must not overwrite. */
function pluginFiles(flags: Record<string, unknown>): [string, string][] {
  const names = [flags.plugin, process.env.GPUMEM_PLUGINS]
    .filter((v): v is string => typeof v === 'string')
    .flatMap((list) => list.split(','))
    .map((name) => name.trim())
    .filter(Boolean);
  return names.filter((name) => existsSync(resolve(name))).map((name) => [`the plug-in ${name}`, name]);
}

/**
 * Checks every output flag of `flags` that is set (see {@link checkOutputPath}), and that no two
 * name the same file, nor the same file as an input (`inputs`: a label, e.g. 'the trace', and its
 * path; plug-in files named by `--plugin` or GPUMEM_PLUGINS are inputs too): a run must not
 * overwrite what it reads or one output with another, whatever links name them. At most one output
 * may go to standard output.
 */
export function checkOutputFlags(
  command: string,
  flags: Record<string, unknown>,
  names: readonly string[],
  inputs: readonly (readonly [string, string])[] = [],
): void {
  const outputs = names.flatMap((name) => {
    const value = flags[name];
    return typeof value === 'string' && value !== '' ? [[name, value] as const] : [];
  });
  for (const [name, value] of outputs) {
    if (value === stdoutPath && name !== 'json')
      throw new UsageError(`gpumem ${command}: '--${name}' must be a file name ('-', standard output, is for '--json')`);
    checkOutputPath(command, name, value);
  }
  const toStdout = outputs.filter(([, value]) => isStdout(value));
  if (toStdout.length > 1)
    throw new UsageError(
      `gpumem ${command}: ${toStdout.map(([n]) => `'--${n}'`).join(' and ')} both write to standard output; give one of them a file`,
    );
  const read = new Map<string, string>([...inputs, ...pluginFiles(flags)].map(([label, path]) => [identity(path), label]));
  const written = new Map<string, string>();
  for (const [name, value] of outputs) {
    if (isStdout(value) || isCharacterDevice(value)) continue; // /dev/null takes any number of outputs
    const id = identity(value);
    const input = read.get(id);
    if (input !== undefined)
      throw new UsageError(`gpumem ${command}: '--${name}' ${value} is ${input}: writing it would overwrite the input; give another file`);
    const other = written.get(id);
    if (other !== undefined)
      throw new UsageError(
        `gpumem ${command}: '--${other}' and '--${name}' both name ${value}: one would overwrite the other; give each its own file`,
      );
    written.set(id, name);
  }
}

/**
 * Writes an output file whole or not at all: into a temporary file beside it, then renamed over it
 * (through a symbolic link, beside the file it leads to). A failed write (ENOSPC, EFBIG, EIO) removes
 * the temporary file, leaves the previous content, and throws naming the file. Character devices
 * (/dev/null) are written directly.
 */
export function writeOutput(path: string, data: string | Uint8Array): void {
  const full = resolve(path);
  let target = full;
  try {
    if (statSync(full).isCharacterDevice()) {
      writeFileSync(full, data);
      return;
    }
    target = realpathSync(full);
  } catch {
    // a new file
  }
  const temporary = join(dirname(target), `.${basename(target)}.${process.pid}.tmp`);
  try {
    writeFileSync(temporary, data);
    renameSync(temporary, target);
  } catch (e) {
    rmSync(temporary, { force: true });
    const kept = existsSync(target) ? 'its previous content is kept' : 'nothing was written';
    throw new Error(`could not write ${path} (${(e as Error).message}); ${kept}`);
  }
}
