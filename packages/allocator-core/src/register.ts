/**
 * Registers the core's own strategies: 'cuda', 'host' and 'native' (a plug-in library). Once per
 * process: a second copy of the core (a plug-in's own) finds them registered and adds nothing.
 */
import { registerBuiltInAllocator } from './registry.js';
import { CudaAllocator, type CudaAllocatorOptions } from './strategies/cuda.js';
import { HostAllocator, type HostAllocatorOptions } from './strategies/host.js';
import { NativePluginAllocator, type NativeAllocatorOptions } from './strategies/native.js';

declare module './registry.js' {
  interface AllocatorOptionsMap {
    cuda: CudaAllocatorOptions;
    host: HostAllocatorOptions;
    native: NativeAllocatorOptions;
  }
}

registerBuiltInAllocator('cuda', (options) => new CudaAllocator(options), {
  description: 'cudaMalloc/cudaFree: every call goes to the driver (the baseline)',
  requiresCuda: true,
  nativeLayers: true,
  peerAccess: true,
});
registerBuiltInAllocator('host', (options) => new HostAllocator(options), {
  description: 'plain host memory, 256-byte aligned (runs without a GPU)',
  requiresCuda: false,
  nativeLayers: true,
  hostMemory: true,
});
registerBuiltInAllocator('native', (options) => new NativePluginAllocator(options), {
  description: 'a strategy from a shared library built against gpumem/plugin.h (options: library, options?, device?)',
  requiresCuda: false,
  nativeLayers: true,
  requiresOptions: true,
});
