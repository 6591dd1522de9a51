/**
 * Allocator specs on the command line: `NAME` or `NAME:key=value:key=value`, e.g.
 * `pool:maxReservedBytes=64MiB`, `async:releaseThreshold=0` or
 * `pool:faultInjection.failAfterBytes=1GiB` (dotted keys for nested options), so that two
 * configurations of one strategy can be compared side by side.
 * @module
 */
import { hasAllocator, parseSize, strategyInfo } from '@gpumem/allocator-core';

/** A strategy name, its options, and the label its run is reported under. */
export interface AllocatorSpec {
  /**
   * The run's label: the spec as written, except for a 'plugin' library ('native', its deprecated
   * name, too), which is named after its library file (`plugin:library=./build/libslab.so:options=x`
   * is `slab:options=x`); a registered strategy that says which allocator it reproduces has that
   * after it (`caching (PyTorch's allocator)`).
   */
  label: string;
  name: string;
  options: Record<string, unknown>;
}

/**
 * A value: true/false; a size (an integer, optionally with a KiB/MiB/GiB/TiB suffix, a fraction
 * with one such as 1.5GiB, parsed by the core's parseSize, the same forms as the native side's);
 * another number (negative or decimal, e.g. a learning rate); or a string. Something that looks like
 * a size but is not one ('4GB', '1.5.5GiB') is an error naming the option, rather than a string the
 * strategy would reject later.
 */
function parseOptionValue(raw: string, key: string): unknown {
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  if (/^[0-9]+$/.test(raw)) return Number(raw);
  if (/^[-+]?[0-9][0-9.]*[A-Za-z]+$/.test(raw)) return parseSize(raw, key); // a number with a unit
  if (/^-?[0-9]+(\.[0-9]+)?(e-?[0-9]+)?$/i.test(raw)) return Number(raw);
  return raw;
}

/** Sets `key` (dotted keys make nested objects: `faultInjection.failEvery=3`); each key once. */
function setOption(options: Record<string, unknown>, key: string, value: unknown, spec: string): void {
  const path = key.split('.');
  if (path.some((p) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(p))) {
    throw new RangeError(`Expected an option name (letters, digits, '_', dotted for nested options) in '${spec}' but received '${key}'`);
  }
  let target = options;
  for (const part of path.slice(0, -1)) {
    const next = target[part];
    if (next !== undefined && (typeof next !== 'object' || next === null)) {
      throw new RangeError(`Expected each option once in '${spec}' but '${part}' is both a value and an object`);
    }
    target[part] ??= {};
    target = target[part] as Record<string, unknown>;
  }
  const last = path.at(-1)!;
  if (last in target) throw new RangeError(`Expected each option once in '${spec}' but '${key}' is repeated`);
  target[last] = value;
}

/** Parses one spec; throws RangeError naming the spec when it is malformed. */
export function parseAllocatorSpec(spec: string): AllocatorSpec {
  const [name, ...pairs] = spec.split(':');
  if (!name || !/^[a-z][a-z0-9-]*$/.test(name)) {
    throw new RangeError(`Expected NAME or NAME:key=value[:key=value...] for an allocator but received '${spec}'`);
  }
  const options: Record<string, unknown> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0 || eq === pair.length - 1) {
      throw new RangeError(`Expected key=value after '${name}:' in '${spec}' but received '${pair}'`);
    }
    setOption(options, pair.slice(0, eq), parseOptionValue(pair.slice(eq + 1), pair.slice(0, eq)), spec);
  }
  const models = hasAllocator(name) ? strategyInfo(name).models : undefined;
  const label = name === 'plugin' || name === 'native' ? pluginLabel(spec, pairs) : spec;
  return { label: models === undefined ? label : `${label} (${models})`, name, options };
}

/**
 * A plug-in library's label: its library file's name without the `lib` prefix and the extension,
 * then its other options as written; the spec as written when there is no library.
 */
function pluginLabel(spec: string, pairs: readonly string[]): string {
  const library = pairs.find((p) => p.startsWith('library='));
  if (library === undefined) return spec;
  const file = library.slice('library='.length).split(/[\\/]/).at(-1)!;
  const base = file.replace(/\.(so(\.[0-9]+)*|dylib|dll)$/, '').replace(/^lib(?=.)/, '');
  if (base === '') return spec;
  return [base, ...pairs.filter((p) => p !== library)].join(':');
}

/** Parses a comma-separated list of specs; labels must be unique. */
export function parseAllocatorList(list: string): AllocatorSpec[] {
  const written = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const specs = written.map(parseAllocatorSpec);
  if (specs.length === 0) throw new RangeError(`Expected at least one allocator but received '${list}'`);
  // Two plug-in libraries of one file name in different folders: each is labelled as written.
  specs.forEach((s, i) => {
    if (specs.some((o, j) => j !== i && o.label === s.label && written[j] !== written[i])) s.label = written[i]!;
  });
  const seen = new Set<string>();
  for (const s of specs) {
    if (seen.has(s.label)) throw new RangeError(`Expected each allocator once but '${s.label}' is listed twice`);
    seen.add(s.label);
  }
  return specs;
}
