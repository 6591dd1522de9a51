/**
 * The strategies a comparison can name: the ones that ship with gpumem, registered by importing
 * their packages, and plug-ins given as module specifiers that the caller has already resolved
 * (the CLI resolves package names from the user's project; see @gpumem/cli).
 * @module
 */

/** The strategy packages that ship with gpumem (each registers itself on import). */
export const builtInStrategyPackages = [
  '@gpumem/allocator-uvm',
  '@gpumem/allocator-pool',
  '@gpumem/allocator-async',
  '@gpumem/allocator-expandable',
  '@gpumem/allocator-tiered',
  '@gpumem/allocator-pinned',
] as const;

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
