/**
 * Output files are checked before any work: a run of several minutes must not end in ENOENT or
 * EACCES, nor overwrite its own input or another output of the same run.
 * @module
 */
import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UsageError } from './args.js';

/** The output path that means standard output: the JSON goes there and every status line to stderr. */
const stdoutPath = '-';

/** True when `path` names standard output (`-`, or /dev/stdout, which a status line would corrupt). */
export function isStdout(path: unknown): boolean {
  return path === stdoutPath || path === '/dev/stdout';
}

/**
 * Throws a UsageError naming `flag` when `path` cannot be written: its folder is missing or not
 * writable, the path is a folder, or it is an existing file that cannot be written. Nothing is
 * created.
 */
function checkOutputPath(command: string, flag: string, path: string): void {
  if (isStdout(path)) return;
  const full = resolve(path);
  let isDirectory = false;
  let exists = false;
  try {
    isDirectory = statSync(full).isDirectory();
    exists = true;
  } catch {
    // a new file: its folder is checked below
  }
  if (isDirectory) throw new UsageError(`gpumem ${command}: '--${flag}' ${path}: is a folder; give a file name`);
  if (exists) {
    try {
      accessSync(full, constants.W_OK);
    } catch {
      throw new UsageError(`gpumem ${command}: '--${flag}' ${path}: the file exists and cannot be written (read-only?)`);
    }
    return;
  }
  const folder = dirname(full);
  try {
    accessSync(folder, constants.W_OK);
  } catch (e) {
    const missing = (e as NodeJS.ErrnoException).code === 'ENOENT';
    throw new UsageError(
      `gpumem ${command}: '--${flag}' ${path}: ${missing ? `the folder ${folder} does not exist` : `cannot write in ${folder}`}`,
    );
  }
}

/** One file as the file system sees it: symbolic links followed where the file exists. */
function identity(path: string): string {
  const full = resolve(path);
  return existsSync(full) ? realpathSync(full) : full;
}

/**
 * Checks every output flag of `flags` that is set (see {@link checkOutputPath}), and that no two
 * name the same file, nor the same file as an input (`inputs`: a label, e.g. 'the trace', and its
 * path): a run must not overwrite what it reads or one output with another. At most one output may
 * go to standard output.
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
  const read = new Map<string, string>(inputs.map(([label, path]) => [identity(path), label]));
  const written = new Map<string, string>();
  for (const [name, value] of outputs) {
    if (isStdout(value)) continue;
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
