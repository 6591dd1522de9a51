/**
 * The strategies a comparison can name: the ones that ship with gpumem, registered by importing
 * their packages, and plug-ins given as module specifiers that the caller has already resolved
 * (the CLI resolves package names from the user's project; see @gpumem/cli).
 *
 * The built-in ones are this package's dependencies whose package.json says
 * `"gpumem": { "strategy": true }`: a strategy is compared by default once it is a dependency here,
 * with nothing to list by hand.
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface Manifest {
  dependencies?: Record<string, string>;
  gpumem?: { strategy?: boolean };
}

function readManifest(path: string): Manifest {
  return JSON.parse(readFileSync(path, 'utf8')) as Manifest;
}

/** `name`'s package.json, looked for as Node looks for the package: node_modules/<name> in each folder up from `from`. */
function findManifest(name: string, from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name, 'package.json');
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/** This package's strategy dependencies, in the order its package.json lists them. */
function strategyDependencies(): string[] {
  // src/ and dist/ both sit right under the package's folder.
  const packageDir = fileURLToPath(new URL('..', import.meta.url));
  const own = readManifest(join(packageDir, 'package.json'));
  return Object.keys(own.dependencies ?? {}).filter((dependency) => {
    const manifest = findManifest(dependency, packageDir);
    return manifest !== undefined && readManifest(manifest).gpumem?.strategy === true;
  });
}

/** The strategy packages that ship with gpumem (each registers itself on import). */
export const builtInStrategyPackages: readonly string[] = Object.freeze(strategyDependencies());

/** Imports the built-in strategy packages, then each plug-in module; a failure names the module. */
export async function importStrategies(plugins: readonly string[] = []): Promise<void> {
  for (const specifier of [...builtInStrategyPackages, ...plugins]) {
    try {
      await import(specifier);
    } catch (e) {
      throw new Error(`could not load allocator plug-in '${specifier}': ${(e as Error).message}`);
    }
  }
}
