/**
 * Loads the allocator plug-ins, so every strategy is registered before a command lists or uses
 * them: the three that ship with gpumem, and any named in GPUMEM_PLUGINS (comma-separated module
 * names or paths), e.g. GPUMEM_PLUGINS=@acme/allocator-slab.
 * @module
 */
import { pathToFileURL } from 'node:url';
import { isAbsolute, resolve } from 'node:path';

/** The plug-ins that ship with gpumem. */
export const allocatorPlugins = ['@gpumem/allocator-uvm', '@gpumem/allocator-pool', '@gpumem/allocator-async'];

/** Imports every plug-in; a plug-in that fails to load is an error naming it. */
export async function loadAllocatorPlugins(extra: string = process.env.GPUMEM_PLUGINS ?? ''): Promise<string[]> {
  const named = extra.split(',').map((s) => s.trim()).filter(Boolean);
  const loaded: string[] = [];
  for (const name of [...allocatorPlugins, ...named]) {
    const specifier = name.startsWith('.') || isAbsolute(name) ? pathToFileURL(resolve(name)).href : name;
    try {
      await import(specifier);
      loaded.push(name);
    } catch (e) {
      throw new Error(`could not load allocator plug-in '${name}': ${(e as Error).message}`);
    }
  }
  return loaded;
}
