/**
 * Finds and loads allocator plug-ins, so every strategy is registered before a command lists or
 * uses them: the ones that ship with gpumem, and any named in GPUMEM_PLUGINS or `--plugin`
 * (comma-separated package names or paths), e.g. GPUMEM_PLUGINS=@acme/allocator-slab.
 *
 * A package name resolves from the current directory first (the user's project, where the
 * plug-in is installed), then from where gpumem itself is installed; a path (one that starts with
 * `.` or `/`) resolves from the current directory, to a module file or to a package folder, whose
 * package.json says the module (`exports`, else `main`, else index.js). Node's resolution looks in
 * the node_modules of the current directory and of every folder above it, so a package there
 * shadows one of the same name that gpumem ships: where each plug-in was loaded from is said on
 * stderr.
 *
 * Every file a plug-in is read from (its module, its package.json) must be a regular file of bounded
 * size: a device (/dev/zero) or a FIFO would be read without end or wait forever. A module whose
 * loading does not settle within GPUMEM_PLUGIN_TIMEOUT seconds (default 60) is an error.
 * @module
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { nonRegularFileKind } from '@gpumem/allocator-core';
import { builtInStrategyPackages, importPlugin, importStrategies, PluginLoadError } from '@gpumem/compare';
import { exports as packageExports } from 'resolve.exports';
import { stderrText } from './terminal.js';

/** The largest plug-in module file loaded: a bundled strategy is far smaller. */
export const maxPluginModuleBytes = 64 * 2 ** 20;

/** The largest package.json of a plug-in read. */
const maxManifestBytes = 2 ** 20;

/**
 * Checks that `path`, a file a plug-in is read from, is a regular file of at most `maxBytes`: what
 * Node would read whole. Throws a {@link PluginLoadError} naming the plug-in otherwise.
 */
function checkPluginFile(name: string, path: string, maxBytes: number, what: string): void {
  const stats = statSync(path, { throwIfNoEntry: false });
  if (stats === undefined) return; // Node's own resolution or import says what is missing
  const kind = nonRegularFileKind(stats);
  if (kind !== undefined) {
    throw new PluginLoadError(name, 'ERR_PLUGIN_NOT_FILE', `${what} ${path} is ${kind}, not a regular file`);
  }
  if (stats.size > maxBytes) {
    throw new PluginLoadError(
      name,
      'ERR_PLUGIN_TOO_LARGE',
      `${what} ${path} is ${stats.size} bytes, more than the ${maxBytes} a plug-in's ${what} may be`,
    );
  }
}

/** The plug-ins that ship with gpumem. */
export const allocatorPlugins: readonly string[] = builtInStrategyPackages;

/** Splits a comma-separated list of plug-in names, dropping blanks. */
export function pluginNames(list: string | undefined): string[] {
  return (list ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * The module specifier (a file URL) of a plug-in named by package name or path, resolved from
 * `cwd` first, then from gpumem's own install. Throws naming every place it looked.
 */
export function resolvePlugin(name: string, cwd: string = process.cwd()): string {
  const specifier = specifierOf(name, cwd);
  if (specifier.startsWith('file:')) checkPluginFile(name, fileURLToPath(specifier), maxPluginModuleBytes, 'module');
  return specifier;
}

/** The module specifier of a plug-in, before its file is checked. */
function specifierOf(name: string, cwd: string): string {
  if (name.startsWith('.') || isAbsolute(name)) return pathToFileURL(pluginModuleAt(name, resolve(cwd, name))).href;
  const tried: string[] = [];
  for (const from of [join(cwd, 'package.json'), import.meta.url]) {
    try {
      return pathToFileURL(createRequire(from).resolve(name)).href;
    } catch (e) {
      tried.push(`${from.startsWith('file:') ? "gpumem's install" : cwd}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  try {
    // ESM-only packages (an "exports" map with "import" only) resolve here.
    return import.meta.resolve(name);
  } catch {
    // A folder of that name here was meant as a path, but a bare name is a package name to Node.
    const asPath = existsSync(resolve(cwd, name)) ? ` To load the folder or file ${resolve(cwd, name)}, write it as ./${name}.` : '';
    throw new Error(
      `could not find allocator plug-in '${name}'. Install it in this project (npm install ${name}) or give its path.${asPath} Tried: ${tried.join('; ')}`,
    );
  }
}

/**
 * The module file a plug-in path names: the file itself, or for a package folder (a plug-in's own
 * folder, or ./node_modules/NAME) the entry point its package.json gives: `exports` for the package
 * itself ('.', under Node's conditions for import), else `main`, else index.js, as Node resolves
 * the package by name. Throws saying what is missing when nothing loadable is there.
 */
function pluginModuleAt(name: string, path: string): string {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (stat === undefined) throw new Error(`${path} does not exist`);
  if (!stat.isDirectory()) return path;
  const manifestPath = join(path, 'package.json');
  if (!existsSync(manifestPath)) {
    throw new Error(`${path} is a folder without a package.json: give the plug-in's package folder or its module file`);
  }
  checkPluginFile(name, manifestPath, maxManifestBytes, 'package.json');
  let manifest: { name?: unknown; main?: unknown; exports?: unknown };
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as typeof manifest;
  } catch (e) {
    throw new Error(`${manifestPath} is not valid JSON: ${(e as Error).message}`);
  }
  const candidates = entryCandidates(manifest, manifestPath);
  const found = candidates.map((entry) => resolve(path, entry)).find((file) => statSync(file, { throwIfNoEntry: false })?.isFile());
  if (found === undefined) {
    throw new Error(
      `${manifestPath} names ${candidates.map((c) => `'${c}'`).join(' or ')} as its module, which is not there (is the plug-in built?)`,
    );
  }
  return found;
}

/** The entry points a package.json names for the package itself, in the order Node tries them. */
function entryCandidates(manifest: { main?: unknown; exports?: unknown }, manifestPath: string): string[] {
  if (manifest.exports !== undefined && manifest.exports !== null) {
    let targets: string[] | undefined;
    try {
      targets = packageExports(manifest, '.') ?? undefined;
    } catch (e) {
      throw new Error(`${manifestPath}: its "exports" has no entry for the package itself ('.'): ${(e as Error).message}`);
    }
    if (!targets || targets.length === 0) throw new Error(`${manifestPath}: its "exports" gives no module for '.' under Node's conditions`);
    return targets;
  }
  // Node's legacy main resolution: main as given, with .js, as a folder's index.js; then index.js.
  const main =
    typeof manifest.main === 'string' && manifest.main !== ''
      ? [manifest.main, `${manifest.main}.js`, join(manifest.main, 'index.js')]
      : [];
  return [...main, 'index.js'];
}

/**
 * Imports the built-in strategies and every plug-in named in `extra` (default GPUMEM_PLUGINS);
 * returns the resolved specifiers of the plug-ins, for child processes to import in turn.
 */
export async function loadAllocatorPlugins(
  extra: string | readonly string[] = process.env.GPUMEM_PLUGINS ?? '',
  report: (line: string) => void = (line) => stderrText.write(`${line}\n`),
): Promise<string[]> {
  const named = typeof extra === 'string' ? pluginNames(extra) : [...extra];
  const resolved: string[] = [];
  for (const name of named) {
    let specifier: string;
    try {
      specifier = resolvePlugin(name);
    } catch (e) {
      if (e instanceof PluginLoadError) throw e;
      throw new Error(`could not load allocator plug-in '${name}': ${(e as Error).message}`);
    }
    await importPlugin(specifier, name);
    report(`gpumem: plug-in '${name}' loaded from ${specifier.startsWith('file:') ? fileURLToPath(specifier) : specifier}`);
    resolved.push(specifier);
  }
  await importStrategies();
  return resolved;
}
