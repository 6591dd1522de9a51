/**
 * Registers the core's own strategies: 'cuda', 'host' and 'plugin' (a plug-in library; 'native', its
 * older name, is a deprecated alias for one release). Once per process: a second copy of the core
 * (a plug-in's own) finds them registered and adds nothing.
 */
import { registerBuiltInAllocator, registerDeprecatedAlias } from './registry.js';
import { CudaAllocator, type CudaAllocatorOptions, checkCudaOptions } from './strategies/cuda.js';
import { checkHostOptions, HostAllocator, type HostAllocatorOptions } from './strategies/host.js';
import { checkPluginOptions, PluginAllocator, type PluginAllocatorOptions } from './strategies/plugin.js';

declare module './registry.js' {
  interface AllocatorOptionsMap {
    cuda: CudaAllocatorOptions;
    host: HostAllocatorOptions;
    plugin: PluginAllocatorOptions;
    /** @deprecated The old name of 'plugin'; removed in the next release. */
    native: PluginAllocatorOptions;
  }
}

registerBuiltInAllocator('cuda', (options) => new CudaAllocator(options), {
  description: 'cudaMalloc/cudaFree: every call goes to the driver (the baseline)',
  requiresCuda: true,
  nativeLayers: true,
  peerAccess: true,
  checkOptions: checkCudaOptions,
});
registerBuiltInAllocator('host', (options) => new HostAllocator(options), {
  description: 'plain host memory, 256-byte aligned (runs without a GPU)',
  requiresCuda: false,
  nativeLayers: true,
  hostMemory: true,
  checkOptions: checkHostOptions,
});
registerBuiltInAllocator('plugin', (options) => new PluginAllocator(options), {
  description: 'a strategy from a shared library built against gpumem/plugin.h (options: library, options?, device?)',
  requiresCuda: false,
  nativeLayers: true,
  requiresOptions: true,
  checkOptions: checkPluginOptions,
});
registerDeprecatedAlias('native', 'plugin');
