/**
 * Finds and loads allocator plug-ins, so every strategy is registered before a command lists or
 * uses them: the ones that ship with gpumem, and any named in GPUMEM_PLUGINS or `--plugin`
 * (comma-separated package names or paths), e.g. GPUMEM_PLUGINS=@acme/allocator-slab.
 *
 * A package name resolves from the current directory first (the user's project, where the
 * plug-in is installed), then from where gpumem itself is installed; a path resolves from the
 * current directory. Node's resolution looks in the node_modules of the current directory and of
 * every folder above it, so a package there shadows one of the same name that gpumem ships: where
 * each plug-in was loaded from is said on stderr.
 * @module
 */
import { createRequire } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { builtInStrategyPackages, importStrategies } from '@gpumem/compare';

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
function resolvePlugin(name: string, cwd: string = process.cwd()): string {
  if (name.startsWith('.') || isAbsolute(name)) return pathToFileURL(resolve(cwd, name)).href;
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
    throw new Error(
      `could not find allocator plug-in '${name}'. Install it in this project (npm install ${name}) or give its path. Tried: ${tried.join('; ')}`,
    );
  }
}

/**
 * Imports the built-in strategies and every plug-in named in `extra` (default GPUMEM_PLUGINS);
 * returns the resolved specifiers of the plug-ins, for child processes to import in turn.
 */
export async function loadAllocatorPlugins(
  extra: string | readonly string[] = process.env.GPUMEM_PLUGINS ?? '',
  report: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<string[]> {
  const named = typeof extra === 'string' ? pluginNames(extra) : [...extra];
  const resolved: string[] = [];
  for (const name of named) {
    let specifier: string;
    try {
      specifier = resolvePlugin(name);
    } catch (e) {
      throw new Error(`could not load allocator plug-in '${name}': ${(e as Error).message}`);
    }
    try {
      await import(specifier);
    } catch (e) {
      throw new Error(`could not load allocator plug-in '${name}': ${(e as Error).message}`);
    }
    report(`gpumem: plug-in '${name}' loaded from ${specifier.startsWith('file:') ? fileURLToPath(specifier) : specifier}`);
    resolved.push(specifier);
  }
  await importStrategies();
  return resolved;
}
