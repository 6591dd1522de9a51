/**
 * @gpumem/examples/arena: registers the 'arena' strategy on import.
 *
 * ```ts
 * import { createAllocator } from '@gpumem/allocator-core';
 * import '@gpumem/examples/arena';
 *
 * const arena = createAllocator('arena', { upstream: 'host', chunkBytes: 1 << 20 });
 * ```
 * @packageDocumentation
 */
import { registerAllocator } from '@gpumem/allocator-core';
import { ArenaAllocator, type ArenaAllocatorOptions } from './arena-allocator.js';

declare module '@gpumem/allocator-core' {
  interface AllocatorOptionsMap {
    arena: ArenaAllocatorOptions;
  }
}

registerAllocator('arena', (options) => new ArenaAllocator(options), {
  description:
    'per-step arena over any registered allocator: bump allocation in 4 MiB chunks, rewound when every block is freed or on reset()',
  requiresCuda: false,
});

export {
  ArenaAllocator,
  ARENA_ALIGNMENT,
  DEFAULT_CHUNK_BYTES,
  type ArenaAllocatorOptions,
  type ArenaOverAllocator,
  type ArenaOverNamedUpstream,
} from './arena-allocator.js';
