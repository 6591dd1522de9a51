import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { workspacePackages } from './scripts/sync-workspaces.mjs';
import { testTime } from './tests/time-budget.ts';

const root = fileURLToPath(new URL('.', import.meta.url));

/**
 * Tests run against the TypeScript sources, and every package name resolves to the same module, so
 * plug-ins and tests share one registry. Each workspace's `exports` entry `./dist/X.js` becomes the
 * alias of its specifier to `src/X.ts` (where that file exists), matched exactly.
 */
function sourceAliases(): { find: RegExp; replacement: string }[] {
  const aliases: { find: RegExp; replacement: string }[] = [];
  for (const { dir, name, manifest } of workspacePackages(root)) {
    for (const [subpath, target] of Object.entries<unknown>(manifest.exports ?? {})) {
      const built = typeof target === 'string' ? target : (target as { default?: string }).default;
      const match = built?.match(/^\.\/dist\/(.*)\.js$/);
      if (!match) continue;
      const source = join(root, dir, 'src', `${match[1]}.ts`);
      if (!existsSync(source)) continue;
      const specifier = `${name}${subpath.slice(1)}`;
      aliases.push({ find: new RegExp(`^${specifier.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`), replacement: source });
    }
  }
  return aliases;
}

export default defineConfig({
  resolve: { alias: sourceAliases() },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'examples/src/**/*.test.ts', 'tests/**/*.test.ts'],
    // a hang, not a slow machine: the base is scaled to this machine's cores and load (tests/time-budget.ts)
    testTimeout: testTime(120_000),
    hookTimeout: testTime(120_000),
    reporters: ['default', './tests/summary-reporter.ts'],
  },
});
