/**
 * 'cuda': plain cudaMalloc / cudaFree, the baseline. Every call goes to the driver, and cudaFree
 * synchronises the device, so recordStream has nothing to do.
 * @module
 */
import { cudaDevice } from '../device.js';
import { NativeAllocator, nativeLayerOptions } from '../native-allocator.js';
import { defineOptions, option, type OptionsOf } from '../options.js';
import { checkPeerAccess, peerAccessOption, peerAccessSpec } from '../peer-access.js';

const cudaOptions = defineOptions('cuda', {
  /** CUDA device ordinal (default 0). */
  device: option.nonNegative({ default: 0 }),
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory: each gets peer access
   * to `device` when the allocator is made (cudaDeviceEnablePeerAccess from the peer's context;
   * it stays on, for all of `device`'s cudaMalloc memory). Each must be another device with a P2P
   * path to `device` (`peerTopology()`; `gpumem info` prints the matrix). Default: none.
   */
  peerAccess: peerAccessOption,
  ...nativeLayerOptions,
});

/** The 'cuda' strategy's options (from its options definition). */
export interface CudaAllocatorOptions extends OptionsOf<typeof cudaOptions> {}

/** Checks 'cuda' options as its constructor does before it looks for the device, making nothing. */
export function checkCudaOptions(options: object): void {
  cudaOptions.parse(options);
}

export class CudaAllocator extends NativeAllocator {
  constructor(options: CudaAllocatorOptions = {}) {
    const { device: index, peerAccess } = cudaOptions.parse(options);
    const device = cudaDevice(index);
    const peers = checkPeerAccess(peerAccess, device);
    super('cuda', device, { strategy: 'cuda', device: index, ...peerAccessSpec(peers) }, options);
  }
}
