/**
 * Where the example plug-in library (examples/cpp, a slab strategy behind gpumem/plugin.h) is: built
 * beside gpumem.node by `npm run build:native`, or at $GPUMEM_EXAMPLE_SLAB.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export const exampleSlabLibrary =
  process.env.GPUMEM_EXAMPLE_SLAB ?? join(repoRoot, 'native', 'build', 'Release', 'libgpumem_example_slab.so');

if (!existsSync(exampleSlabLibrary)) {
  throw new Error(`the example plug-in library is missing: ${exampleSlabLibrary} (run \`npm run build:native\`)`);
}
