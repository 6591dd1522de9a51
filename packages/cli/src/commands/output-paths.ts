/**
 * Output files are checked before any work: a run of several minutes must not end in ENOENT or
 * EACCES, nor overwrite its own input or another output of the same run. They are written by the
 * core's OutputFile: whole or not at all, regular files only (a full disk leaves the previous file
 * or none, never a truncated one).
 * @module
 */
import { accessSync, constants, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputFileError, outputTarget } from '@gpumem/allocator-core';
import { parseAllocatorList } from '@gpumem/compare';
import { UsageError } from './args.js';

/** The output path that means standard output: the JSON goes there and every status line to stderr. */
const stdoutPath = '-';

/** True when `path` names standard output (`-`, or /dev/stdout, which a status line would corrupt). */
export function isStdout(path: unknown): boolean {
  return path === stdoutPath || path === '/dev/stdout';
}

/** True for a path on a kernel file system (/proc, /sys), whose files take no reports. */
function isKernelPath(full: string): boolean {
  return /^\/(?:proc|sys)(?:\/|$)/.test(full);
}

/**
 * Throws a UsageError naming `flag` when `path` cannot be written: everything the writer refuses
 * (a device other than /dev/null, a FIFO, socket or folder, a link to nothing, a missing folder, a
 * NUL byte; see outputTarget), a path in /proc or /sys, an existing file or a folder that cannot be
 * written. Nothing is created. Returns true for the null device.
 */
function checkOutputPath(command: string, flag: string, path: string): boolean {
  if (isStdout(path)) return false;
  const refuse = (why: string): never => {
    throw new UsageError(`gpumem ${command}: '--${flag}' ${path}: ${why}`);
  };
  const target = (() => {
    try {
      return outputTarget(path);
    } catch (e) {
      if (e instanceof OutputFileError) return refuse(e.reason);
      throw e;
    }
  })();
  if (target.discard) return true;
  if (isKernelPath(target.path)) refuse(`is on a kernel file system (${target.path}); give a file on a disk`);
  const folder = dirname(target.path);
  try {
    // The new file is made in the folder and renamed over the old one: the folder must be writable.
    accessSync(folder, constants.W_OK);
  } catch {
    refuse(`cannot write in ${folder}`);
  }
  if (target.existing !== undefined) {
    try {
      accessSync(target.path, constants.W_OK);
    } catch {
      refuse('the file exists and cannot be written (read-only?)');
    }
  }
  return false;
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

/**
 * The inputs of every command besides its own files: the plug-in modules it loaded (`plugins`: the
 * resolved specifiers loadAllocatorPlugins returns, so a plug-in folder counts by its main module)
 * and native plug-in libraries (the `library` options of the allocator lists in `specs`, e.g.
 * `--allocator plugin:library=./libslab.so`, and GPUMEM_PLUGIN_LIBRARY). An output must not overwrite any of them.
 */
export function pluginInputs(plugins: readonly string[], specs: readonly unknown[] = []): [string, string][] {
  const libraries = specs.flatMap((list) => {
    if (typeof list !== 'string') return [];
    try {
      return parseAllocatorList(list).map((spec) => spec.options.library);
    } catch {
      return []; // the command refuses the list itself, with its own message
    }
  });
  const modules = plugins
    .filter((specifier) => specifier.startsWith('file:'))
    .map((specifier): [string, string] => {
      const file = fileURLToPath(specifier);
      return [`the plug-in ${file}`, file];
    });
  const named = [...libraries, process.env.GPUMEM_PLUGIN_LIBRARY].filter(
    (library): library is string => typeof library === 'string' && library !== '',
  );
  return [...modules, ...named.map((library): [string, string] => [`the plug-in library ${library}`, library])];
}

/**
 * Checks every output flag of `flags` that is set (see {@link checkOutputPath}), and that no two
 * name the same file, nor the same file as an input (`inputs`: a label, e.g. 'the trace', and its
 * path; {@link pluginInputs} gives the plug-ins'): a run must not overwrite what it reads or one
 * output with another, whatever links name them (files are told apart by device and inode). At
 * most one output may go to standard output.
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
  const discarded = new Set<string>();
  for (const [name, value] of outputs) {
    if (value === stdoutPath && name !== 'json')
      throw new UsageError(`gpumem ${command}: '--${name}' must be a file name ('-', standard output, is for '--json')`);
    if (checkOutputPath(command, name, value)) discarded.add(name);
  }
  const toStdout = outputs.filter(([, value]) => isStdout(value));
  if (toStdout.length > 1)
    throw new UsageError(
      `gpumem ${command}: ${toStdout.map(([n]) => `'--${n}'`).join(' and ')} both write to standard output; give one of them a file`,
    );
  const read = new Map<string, string>(inputs.map(([label, path]) => [identity(path), label]));
  const written = new Map<string, string>();
  for (const [name, value] of outputs) {
    if (isStdout(value) || discarded.has(name)) continue; // /dev/null takes any number of outputs
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
