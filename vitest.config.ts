import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (pkg: string) => fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    // Tests run against the TypeScript sources, and every package name resolves to the same
    // module, so plug-ins and tests share one registry.
    alias: {
      // A subpath before its package: aliases match by prefix, in order.
      '@gpumem/allocator-core/tools': fileURLToPath(new URL('./packages/allocator-core/src/tools.ts', import.meta.url)),
      '@gpumem/allocator-core/testing': fileURLToPath(new URL('./packages/allocator-core/src/testing/index.ts', import.meta.url)),
      '@gpumem/allocator-core': src('allocator-core'),
      '@gpumem/allocator-uvm': src('allocator-uvm'),
      '@gpumem/allocator-pool': src('allocator-pool'),
      '@gpumem/allocator-async': src('allocator-async'),
      '@gpumem/allocator-expandable': src('allocator-expandable'),
      '@gpumem/allocator-tiered': src('allocator-tiered'),
      '@gpumem/allocator-pinned': src('allocator-pinned'),
      '@gpumem/distributed': src('distributed'),
      '@gpumem/gnn': src('gnn'),
      '@gpumem/trace': src('trace'),
      '@gpumem/compare': src('compare'),
      '@gpumem/cli': src('cli'),
      '@gpumem/examples/arena': fileURLToPath(new URL('./examples/src/arena/index.ts', import.meta.url)),
    },
  },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'examples/src/**/*.test.ts', 'tests/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ['default', './tests/summary-reporter.ts'],
  },
});
