/**
 * Output files are checked before any work: a run of several minutes must not end in ENOENT.
 * @module
 */
import { accessSync, constants, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UsageError } from './args.js';

/**
 * Throws a UsageError naming `flag` when `path` cannot be written: its folder is missing or not
 * writable, or the path is a folder. Nothing is created.
 */
export function checkOutputPath(command: string, flag: string, path: string): void {
  const full = resolve(path);
  let isDirectory = false;
  try {
    isDirectory = statSync(full).isDirectory();
  } catch {
    // a new file: its folder is checked below
  }
  if (isDirectory) throw new UsageError(`gpumem ${command}: '--${flag}' ${path}: is a folder; give a file name`);
  const folder = dirname(full);
  try {
    accessSync(folder, constants.W_OK);
  } catch (e) {
    const missing = (e as NodeJS.ErrnoException).code === 'ENOENT';
    throw new UsageError(`gpumem ${command}: '--${flag}' ${path}: ${missing ? `the folder ${folder} does not exist` : `cannot write in ${folder}`}`);
  }
}

/** Checks every output flag of `flags` that is set (see {@link checkOutputPath}). */
export function checkOutputFlags(command: string, flags: Record<string, unknown>, names: readonly string[]): void {
  for (const name of names) {
    const value = flags[name];
    if (typeof value === 'string' && value !== '') checkOutputPath(command, name, value);
  }
}
