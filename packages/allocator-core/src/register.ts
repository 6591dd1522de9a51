/** Registers the core's own strategies: 'cuda' and 'host'. */
import { registerAllocator } from './registry.js';
import { CudaAllocator, type CudaAllocatorOptions } from './strategies/cuda.js';
import { HostAllocator, type HostAllocatorOptions } from './strategies/host.js';

declare module './registry.js' {
  interface AllocatorOptionsMap {
    cuda: CudaAllocatorOptions;
    host: HostAllocatorOptions;
  }
}

registerAllocator('cuda', (options) => new CudaAllocator(options), {
  description: 'cudaMalloc/cudaFree: every call goes to the driver (the baseline)',
  requiresCuda: true,
  nativeLayers: true,
});
registerAllocator('host', (options) => new HostAllocator(options), {
  description: 'plain host memory, 256-byte aligned (runs without a GPU)',
  requiresCuda: false,
  nativeLayers: true,
  hostMemory: true,
});
