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

/** The environment variable that sets how long a plug-in's module may take to load, in seconds. */
export const pluginTimeoutVariable = 'GPUMEM_PLUGIN_TIMEOUT';

/** How long a plug-in's module may take to load by default: its imports, and a top-level await. */
export const defaultPluginTimeoutSeconds = 60;

/** Why a plug-in did not load. */
export type PluginLoadErrorCode = 'ERR_PLUGIN_NOT_FILE' | 'ERR_PLUGIN_TOO_LARGE' | 'ERR_PLUGIN_TIMEOUT' | 'ERR_PLUGIN_LOAD';

/** A plug-in that did not load: names it, and says why (`code`). */
export class PluginLoadError extends Error {
  override readonly name = 'PluginLoadError';
  constructor(
    /** The plug-in as it was named (a package name, a path, a module specifier). */
    readonly plugin: string,
    readonly code: PluginLoadErrorCode,
    reason: string,
  ) {
    super(`could not load allocator plug-in '${plugin}': ${reason}`);
  }
}

/**
 * How long a plug-in may take to load, in milliseconds: {@link pluginTimeoutVariable} (seconds, a
 * positive number) where set, else {@link defaultPluginTimeoutSeconds}. A setting that is not a
 * positive number is a RangeError naming it.
 */
function pluginTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  const text = env[pluginTimeoutVariable];
  if (text === undefined || text === '') return defaultPluginTimeoutSeconds * 1000;
  const seconds = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!(seconds > 0) || seconds * 1000 > 2 ** 31 - 1) {
    throw new RangeError(
      `${pluginTimeoutVariable} must be a positive number of seconds up to 2147483 (default ${defaultPluginTimeoutSeconds}), but it is ${JSON.stringify(text.slice(0, 40))}`,
    );
  }
  return Math.ceil(seconds * 1000);
}

/**
 * Imports a plug-in's module, which registers its strategies. A module whose loading does not settle
 * within `timeoutMs` (a top-level await on something that never comes: Node would otherwise end the
 * process, exit 0, with nothing done) is a {@link PluginLoadError} `ERR_PLUGIN_TIMEOUT`; any failure
 * names the plug-in as `name`.
 */
export async function importPlugin(specifier: string, name: string = specifier, timeoutMs: number = pluginTimeoutMs()): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new PluginLoadError(
            name,
            'ERR_PLUGIN_TIMEOUT',
            `its module did not finish loading within ${timeoutMs / 1000} s (a top-level await that never settles?); ${pluginTimeoutVariable}=SECONDS allows it longer`,
          ),
        ),
      timeoutMs,
    );
  });
  try {
    await Promise.race([import(specifier), timedOut]);
  } catch (e) {
    if (e instanceof PluginLoadError) throw e;
    throw new PluginLoadError(name, 'ERR_PLUGIN_LOAD', (e as Error).message);
  } finally {
    clearTimeout(timer);
  }
}

/** Imports the built-in strategy packages, then each plug-in module; a failure names the module. */
export async function importStrategies(plugins: readonly string[] = []): Promise<void> {
  const timeoutMs = pluginTimeoutMs();
  for (const specifier of [...builtInStrategyPackages, ...plugins]) await importPlugin(specifier, specifier, timeoutMs);
}
