/**
 * Each strategy package's `src/options.generated.ts`, made from the native core's descriptor of its
 * strategy (native/include/gpumem/strategy_registry.hpp, as the built addon's `strategies()` lists
 * it, the registry's one serialiser strategies_json()): the registry's description and flags, and the
 * options the Node binding takes, each with its type, default and TSDoc (the descriptor's doc, else
 * its help and default). The options are types only: the native core checks their values when an
 * allocator is made. Also allocator-core's `src/flags.generated.ts`: the registry's flags with
 * their documentation (the addon's `strategyFlags()`), which nothing else names by hand.
 * `node scripts/sync-strategies.mjs` rewrites them; `--check` writes nothing and exits 1 naming each
 * file that is out of date (tests/native-strategies.test.ts runs it).
 *
 * A strategy package is a workspace with `"gpumem": { "strategy": true }` in packages/allocator-<name>,
 * <name> a registered native strategy; the strategies without one ('host', 'cuda', the plug-in
 * strategy) live in allocator-core. Needs the built addon (npm run build -w native).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { strategyPackages } from './sync-workspaces.mjs';

const repository = fileURLToPath(new URL('..', import.meta.url));
const command = 'npm run sync:strategies';

/** The built addon, from native/build. */
function addon(root) {
  const path = join(root, 'native/build/Release/gpumem.node');
  if (!existsSync(path)) throw new Error(`No native addon at ${path}: build it first (npm run build -w native)`);
  return createRequire(import.meta.url)(path);
}

/** The addon's descriptors (strategies()), from native/build. */
export function nativeStrategies(root = repository) {
  return addon(root).strategies();
}

/** The registry's flags JavaScript has, with their documentation (the addon's strategyFlags()). */
export function nativeStrategyFlags(root = repository) {
  return addon(root).strategyFlags();
}

/** Each strategy package (folder) with the descriptor of its strategy. */
export function generatedStrategies(root = repository, descriptors = nativeStrategies(root)) {
  const byName = new Map(descriptors.map((d) => [d.name, d]));
  return strategyPackages(root)
    .map((w) => ({ dir: w.dir, descriptor: byName.get(basename(w.dir).replace(/^allocator-/, '')) }))
    .filter((p) => p.descriptor !== undefined);
}

function quote(text) {
  return `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

const units = [
  [2 ** 30, 'GiB'],
  [2 ** 20, 'MiB'],
  [2 ** 10, 'KiB'],
];

/** A default as the TSDoc says it: sizes in binary units where they divide evenly. */
function shownDefault(option, value) {
  if (option.kind === 'bytes' && typeof value === 'number' && value > 0) {
    for (const [size, unit] of units) if (value % size === 0) return `${value / size} ${unit}`;
  }
  return typeof value === 'string' ? quote(value) : String(value);
}

/** The placement option's one-line help: its choices, and 'auto'. */
function placementHelp(option) {
  const onDevice = option.choices.find((c) => c !== 'host' && c !== 'auto');
  return `${option.help} (default 'auto': '${onDevice}' when a GPU is present, else 'host')`;
}

/** The TSDoc of an option: its doc, else its help and default. */
function tsdoc(option) {
  if (option.doc) return option.doc;
  if (option.placement) return `${placementHelp(option)}.`;
  return option.default === undefined ? `${option.help}.` : `${option.help} (default ${shownDefault(option, option.default)}).`;
}

function comment(text, indent) {
  const width = 100 - indent.length - 3;
  const lines = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  lines.push(line);
  if (lines.length === 1 && lines[0].length + 7 <= 100 - indent.length) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`).join('\n')}\n${indent} */\n`;
}

/** The TypeScript type of an option's values. */
function optionType(strategy, option) {
  switch (option.kind) {
    case 'bytes':
    case 'count':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'text':
      return 'string';
    case 'choice': {
      const choices = option.placement && !option.choices.includes('auto') ? [...option.choices, 'auto'] : option.choices;
      return choices.map(quote).join(' | ');
    }
    default:
      throw new Error(`${strategy}.${option.key}: unknown option kind '${option.kind}'`);
  }
}

/** The option's entry: `option.native<type>(extras)`, its type and default (the native core checks values). */
function entry(strategy, option) {
  const extras = [];
  if (option.placement) {
    extras.push("default: 'auto'");
  } else if (option.default !== undefined) {
    extras.push(`default: ${typeof option.default === 'string' ? quote(option.default) : String(option.default)}`);
  }
  if (option.required) extras.push('required: true');
  const args = extras.length > 0 ? `{ ${extras.join(', ')} }` : '';
  return `option.native<${optionType(strategy, option)}>(${args})`;
}

function camel(name) {
  return name.replace(/-(.)/g, (_, c) => c.toUpperCase());
}

/** The generated module of one strategy, unformatted. */
function generatedModule(descriptor) {
  const { name } = descriptor;
  const placement = descriptor.options.find((o) => o.placement);
  let out = `// Generated by scripts/sync-strategies.mjs from the native descriptor of '${name}' (${name}_strategy(),\n`;
  out += `// native/src/core/resources/); do not edit: \`${command}\` rewrites it.\n`;
  out += "import { option } from '@gpumem/allocator-core';\n\n";
  out += `/** The native '${name}' strategy as its descriptor declares it (see defineNativeStrategy). */\n`;
  out += `export const ${camel(name)}Descriptor = {\n`;
  out += `  name: ${quote(name)},\n`;
  out += `  description: ${quote(descriptor.description)},\n`;
  // the flags it has: every other is false (StrategyFlags, flags.generated.ts, lists them all)
  out += `  flags: { ${Object.entries(descriptor.flags)
    .filter(([, v]) => v === true)
    .map(([k]) => `${k}: true`)
    .join(', ')} },\n`;
  if (placement) out += `  placement: { key: ${quote(placement.key)}, choices: [${placement.choices.map(quote).join(', ')}] },\n`;
  out += '  options: {\n';
  for (const option of descriptor.options) out += `${comment(tsdoc(option), '    ')}    ${option.key}: ${entry(name, option)},\n`;
  out += '  },\n} as const;\n';
  return out;
}

const flagsFile = 'packages/allocator-core/src/flags.generated.ts';

/** allocator-core's module of the registry's flags, unformatted. */
function flagsModule(flags) {
  let out = "// Generated by scripts/sync-strategies.mjs from the native registry's flags (GPUMEM_STRATEGY_FLAGS,\n";
  out += `// native/include/gpumem/strategy_registry.hpp); do not edit: \`${command}\` rewrites it.\n\n`;
  out += "/** A strategy's capability flags, each declared once, by the native registry. */\n";
  out += 'export interface StrategyFlags {\n';
  for (const flag of flags) out += `${comment(flag.doc, '  ')}  ${flag.key}: boolean;\n`;
  out += '}\n\n';
  out += "/** The flags' names, in the registry's order. */\n";
  out += `export const strategyFlagKeys = [${flags.map((f) => quote(f.key)).join(', ')}] as const;\n`;
  return out;
}

/** `text` as biome formats it (the repository's formatting). */
function formatted(root, path, text) {
  const biome = join(root, 'node_modules/.bin/biome');
  return execFileSync(biome, ['format', `--stdin-file-path=${path}`], { cwd: root, input: text, encoding: 'utf8' });
}

/** Each generated file, as it should read (path relative to the repository: text). */
export function expectedStrategyFiles(root = repository, descriptors = nativeStrategies(root), flags = nativeStrategyFlags(root)) {
  const files = { [flagsFile]: formatted(root, flagsFile, flagsModule(flags)) };
  for (const { dir, descriptor } of generatedStrategies(root, descriptors)) {
    const path = `${dir}/src/options.generated.ts`;
    files[path] = formatted(root, path, generatedModule(descriptor));
  }
  return files;
}

/** The generated files that differ from what the descriptors make (written unless `check`). */
export function syncStrategies(root = repository, { check = false, descriptors, flags } = {}) {
  const stale = [];
  const expected = expectedStrategyFiles(root, descriptors ?? nativeStrategies(root), flags ?? nativeStrategyFlags(root));
  for (const [file, text] of Object.entries(expected)) {
    const path = join(root, file);
    if (existsSync(path) && readFileSync(path, 'utf8') === text) continue;
    stale.push(file);
    if (!check) writeFileSync(path, text);
  }
  return stale;
}

export const syncStrategiesCommand = command;

// Run as a command (not imported): the script's own path, links resolved, is the one Node was given.
if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))) {
  const check = process.argv.includes('--check');
  const stale = syncStrategies(repository, { check });
  if (check && stale.length > 0) {
    console.error(`Out of date with the native strategy descriptors: ${stale.join(', ')} (run ${command})`);
    process.exit(1);
  }
  console.log(stale.length === 0 ? 'Up to date with the native strategy descriptors' : `Rewrote ${stale.join(', ')}`);
}
