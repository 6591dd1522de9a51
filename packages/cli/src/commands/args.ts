/**
 * Flag parsing for the command line: declared flags only, typed values, and errors that name the
 * flag and the accepted values (exit code 2).
 * @module
 */

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export type FlagSpec =
  | { type: 'string'; choices?: readonly string[]; default?: string; help: string }
  | { type: 'int'; min?: number; max?: number; default?: number; help: string }
  | { type: 'number'; min?: number; max?: number; default?: number; help: string }
  | { type: 'boolean'; help: string };

export type FlagValues = Record<string, string | number | boolean | undefined>;

/** Parses `--name value`, `--name=value` and boolean `--name`. Numbers accept 2e6 and 2_000_000. */
export function parseFlags(argv: readonly string[], specs: Record<string, FlagSpec>, command: string): FlagValues {
  const values: FlagValues = {};
  for (const [name, spec] of Object.entries(specs)) if ('default' in spec) values[name] = spec.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new UsageError(`gpumem ${command}: unexpected argument '${arg}'`);
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    const spec = specs[name];
    if (!spec) {
      throw new UsageError(`gpumem ${command}: unknown flag '--${name}' (accepted: ${Object.keys(specs).map((k) => `--${k}`).join(', ')})`);
    }
    if (spec.type === 'boolean') {
      values[name] = true;
      continue;
    }
    const raw = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
    if (raw === undefined) throw new UsageError(`gpumem ${command}: flag '--${name}' needs a value`);
    values[name] = parseValue(raw, name, spec, command);
  }
  return values;
}

function parseValue(raw: string, name: string, spec: Exclude<FlagSpec, { type: 'boolean' }>, command: string): string | number {
  if (spec.type === 'string') {
    if (spec.choices && !spec.choices.includes(raw)) {
      throw new UsageError(`gpumem ${command}: '--${name}' must be one of ${spec.choices.join(', ')} (received '${raw}')`);
    }
    return raw;
  }
  const value = Number(raw.replaceAll('_', ''));
  const kind = spec.type === 'int' ? 'an integer' : 'a number';
  if (raw.trim() === '' || !Number.isFinite(value) || (spec.type === 'int' && !Number.isSafeInteger(value))) {
    throw new UsageError(`gpumem ${command}: '--${name}' must be ${kind} (received '${raw}')`);
  }
  if (spec.min !== undefined && value < spec.min) throw new UsageError(`gpumem ${command}: '--${name}' must be at least ${spec.min} (received ${raw})`);
  if (spec.max !== undefined && value > spec.max) throw new UsageError(`gpumem ${command}: '--${name}' must be at most ${spec.max} (received ${raw})`);
  return value;
}

/** The flags' help lines. */
export function flagHelp(specs: Record<string, FlagSpec>): string {
  const rows = Object.entries(specs).map(([name, spec]) => {
    const value = spec.type === 'boolean' ? '' : spec.type === 'string' && spec.choices ? ` ${spec.choices.join('|')}` : ` ${spec.type === 'string' ? 'S' : 'N'}`;
    const def = 'default' in spec && spec.default !== undefined ? ` (default ${spec.default})` : '';
    return [`  --${name}${value}`, `${spec.help}${def}`] as const;
  });
  const width = Math.max(...rows.map(([a]) => a.length)) + 2;
  return rows.map(([a, b]) => a.padEnd(width) + b).join('\n');
}

/** A fixed-width table with a header rule. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
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
