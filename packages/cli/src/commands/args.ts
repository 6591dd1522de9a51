/**
 * Flag parsing for the command line: declared flags only, typed values, and errors that name the
 * flag and the accepted values (exit code 2).
 * @module
 */
import { parseSize } from '@gpumem/allocator-core';
import { stderrText } from '../terminal.js';

export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly code = 'GPUMEM_USAGE';
}

/**
 * A value the library refused (its RangeError or TypeError) is a usage error, its message after
 * `prefix` (e.g. `gpumem train`); anything else is thrown as it is.
 */
export function refusedAsUsage(e: unknown, prefix: string): never {
  if (e instanceof RangeError || e instanceof TypeError) throw new UsageError(`${prefix}: ${e.message}`);
  throw e;
}

export type FlagSpec =
  | {
      type: 'string';
      choices?: readonly string[];
      /** Old values still accepted for one release, each mapped to its new value (a deprecation note is printed). */
      choiceAliases?: Readonly<Record<string, string>>;
      default?: string;
      help: string;
    }
  | { type: 'int'; min?: number; max?: number; default?: number; help: string }
  | { type: 'number'; min?: number; max?: number; default?: number; help: string }
  | { type: 'boolean'; help: string };

export type FlagValues = Record<string, string | number | boolean | undefined>;

/** Old flag names still accepted for one release, each mapped to its new name (a deprecation note is printed). */
export type FlagAliases = Record<string, string>;

/** The line under a flag error that points to the command's help. */
export function seeHelp(command: string): string {
  return `see gpumem ${command} --help`;
}

/** Edit distance between two short words: insertions, deletions, substitutions and swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `word` when it is close enough to be a slip (a prefix of it, or at most a
 * third of its letters off), else undefined.
 */
export function closestName(word: string, candidates: readonly string[]): string | undefined {
  const prefixed = candidates.filter((c) => word.length >= 2 && c.startsWith(word));
  if (prefixed.length === 1) return prefixed[0];
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return bestDistance <= Math.max(1, Math.floor(Math.max(word.length, 3) / 3)) ? best : undefined;
}

/** ` (did you mean X?)` when a candidate is close to `word`, else empty. */
export function didYouMean(word: string, candidates: readonly string[], prefix = ''): string {
  const near = closestName(word, candidates);
  return near === undefined ? '' : ` (did you mean ${prefix}${near}?)`;
}

function unknownFlag(command: string, name: string, known: readonly string[]): UsageError {
  return new UsageError(`gpumem ${command}: unknown flag --${name}${didYouMean(name, known, '--')}\n${seeHelp(command)}`);
}

/** Parses `--name value`, `--name=value` and boolean `--name`. Numbers accept 2e6 and 2_000_000. */
export function parseFlags(
  argv: readonly string[],
  specs: Record<string, FlagSpec>,
  command: string,
  aliases: FlagAliases = {},
): FlagValues {
  const values: FlagValues = {};
  for (const [name, spec] of Object.entries(specs)) if ('default' in spec) values[name] = spec.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new UsageError(`gpumem ${command}: unexpected argument '${arg}'\n${seeHelp(command)}`);
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    const alias = aliases[name];
    if (alias !== undefined)
      stderrText.write(`gpumem ${command}: '--${name}' is deprecated and will be removed in the next release; use '--${alias}'\n`);
    const canonical = alias ?? name;
    const spec = specs[canonical];
    if (!spec) throw unknownFlag(command, name, [...Object.keys(specs), ...Object.keys(aliases)]);
    if (spec.type === 'boolean') {
      values[canonical] = true;
      continue;
    }
    const raw = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
    if (raw === undefined) throw new UsageError(`gpumem ${command}: flag '--${name}' needs a value\n${seeHelp(command)}`);
    values[canonical] = parseValue(raw, canonical, spec, command);
  }
  return values;
}

/**
 * A number as flags take it: decimal digits (an underscore may group them: 1_000_000), an optional
 * fraction and exponent (2e6). Not hexadecimal, octal or binary, and no spaces, which Number() would
 * take ('0x10' is 16, ' 8 ' is 8).
 */
const decimalPattern = /^[+-]?(?=\.?\d)(?:\d(?:_?\d)*)?(?:\.\d(?:_?\d)*)?(?:[eE][+-]?\d+)?$/;

function parseValue(raw: string, name: string, spec: Exclude<FlagSpec, { type: 'boolean' }>, command: string): string | number {
  if (spec.type === 'string') {
    const current = spec.choiceAliases?.[raw];
    if (current !== undefined) {
      stderrText.write(
        `gpumem ${command}: '--${name} ${raw}' is deprecated and will be removed in the next release; use '--${name} ${current}'\n`,
      );
      return current;
    }
    if (spec.choices && !spec.choices.includes(raw)) {
      throw new UsageError(
        `gpumem ${command}: '--${name}' must be one of ${spec.choices.join(', ')} (received '${raw}')${didYouMean(raw, spec.choices)}`,
      );
    }
    return raw;
  }
  const value = decimalPattern.test(raw) ? Number(raw.replaceAll('_', '')) : Number.NaN;
  const kind = spec.type === 'int' ? 'an integer' : 'a number';
  if (!Number.isFinite(value) || (spec.type === 'int' && !Number.isSafeInteger(value))) {
    throw new UsageError(`gpumem ${command}: '--${name}' must be ${kind} (received '${raw}')`);
  }
  if (spec.min !== undefined && value < spec.min)
    throw new UsageError(`gpumem ${command}: '--${name}' must be at least ${spec.min} (received ${raw})`);
  if (spec.max !== undefined && value > spec.max)
    throw new UsageError(`gpumem ${command}: '--${name}' must be at most ${spec.max} (received ${raw})`);
  return value;
}

/** The flags' help lines; a deprecated alias gets a line of its own saying what replaces it. */
export function flagHelp(specs: Record<string, FlagSpec>, aliases: FlagAliases = {}): string {
  const rows = Object.entries(specs).map(([name, spec]) => {
    const value =
      spec.type === 'boolean'
        ? ''
        : spec.type === 'string' && spec.choices
          ? ` ${spec.choices.join('|')}`
          : ` ${spec.type === 'string' ? 'S' : 'N'}`;
    const def = 'default' in spec && spec.default !== undefined ? ` (default ${spec.default})` : '';
    const old =
      spec.type === 'string' && spec.choiceAliases
        ? Object.entries(spec.choiceAliases)
            .map(([from, to]) => `; deprecated: ${from}, the old name of ${to}, removed in the next release`)
            .join('')
        : '';
    return [`  --${name}${value}`, `${spec.help}${def}${old}`] as const;
  });
  for (const [old, current] of Object.entries(aliases))
    rows.push([`  --${old}`, `deprecated: the old name of --${current}, removed in the next release`]);
  const width = Math.max(...rows.map(([a]) => a.length)) + 2;
  return rows.map(([a, b]) => a.padEnd(width) + b).join('\n');
}

/**
 * A progress bar on a TTY (redrawn in place); elsewhere (a log, CI) a plain line every
 * `logEveryMs`, so a long epoch is never silent.
 */
export class ProgressBar {
  #last = 0;
  #lastLine = Date.now();
  /** Milliseconds between plain progress lines when the stream is not a terminal. */
  static logEveryMs = 10_000;
  constructor(
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly width = 30,
  ) {}

  update(label: string, done: number, total: number): void {
    if (!this.out.isTTY) {
      const now = Date.now();
      if (done < total && now - this.#lastLine >= ProgressBar.logEveryMs) {
        this.#lastLine = now;
        this.out.write(`${label}: ${done}/${total} (${Math.floor((100 * done) / total)}%)\n`);
      }
      return;
    }
    const now = Date.now();
    if (done < total && now - this.#last < 100) return;
    this.#last = now;
    const filled = Math.round((done / total) * this.width);
    this.out.write(`\r${label} [${'='.repeat(filled)}${' '.repeat(this.width - filled)}] ${done}/${total}`);
    if (done >= total) this.out.write('\n');
  }
}

/**
 * Splits a command's arguments into its positional arguments (FILE) and its flags, each flag with
 * its value where `specs` (through `aliases`) says it takes one and it is not written `--flag=value`.
 */
export function splitFileArgs(
  argv: readonly string[],
  specs: Record<string, FlagSpec>,
  aliases: FlagAliases = {},
): { files: string[]; flags: string[] } {
  const files: string[] = [];
  const flags: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--') || arg === '--') {
      files.push(arg);
      continue;
    }
    flags.push(arg);
    const name = arg.slice(2);
    const spec = specs[aliases[name] ?? name];
    if (spec && spec.type !== 'boolean' && !arg.includes('=') && i + 1 < argv.length) flags.push(argv[++i]!);
  }
  return { files, flags };
}

/**
 * The FILE of a command that takes exactly one: a UsageError naming `command` otherwise, saying
 * `missing` (what to give, with an example) for none and listing what was received for more.
 */
export function oneFile(command: string, files: readonly string[], name: string, missing: string): string {
  if (files.length === 0) throw new UsageError(`gpumem ${command}: expected ${missing}`);
  if (files.length > 1) throw new UsageError(`gpumem ${command}: expected one ${name} but received ${files.length}: ${files.join(' ')}`);
  return files[0]!;
}

/**
 * A SIZE flag in bytes (the project's size parser), or undefined when not given. A malformed or zero
 * size is a UsageError that names `command` and the flag.
 */
export function positiveSizeFlag(command: string, value: unknown, flag: string): number | undefined {
  if (value === undefined) return undefined;
  let bytes: number;
  try {
    bytes = parseSize(String(value), `'--${flag}'`);
  } catch (e) {
    throw new UsageError(`${command}: ${(e as Error).message}`);
  }
  if (bytes === 0) throw new UsageError(`${command}: '--${flag}' must be more than 0 bytes (received '${String(value)}')`);
  return bytes;
}
