/**
 * 'cuda': plain cudaMalloc / cudaFree, the baseline. Every call goes to the driver, and cudaFree
 * synchronises the device, so recordStream has nothing to do.
 * @module
 */
import { cudaDevice } from '../device.js';
import { NativeAllocator, type NativeLayerOptions } from '../native-allocator.js';
import { checkPeerAccess, peerAccessSpec } from '../peer-access.js';
import { checkNonNegative, checkOptionKeys } from '../validate.js';

export interface CudaAllocatorOptions extends NativeLayerOptions {
  /** CUDA device ordinal (default 0). */
  device?: number;
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory: each gets peer access
   * to `device` when the allocator is made (cudaDeviceEnablePeerAccess from the peer's context;
   * it stays on, for all of `device`'s cudaMalloc memory). Each must be another device with a P2P
   * path to `device` (`peerTopology()`; `gpumem info` prints the matrix). Default: none.
   */
  peerAccess?: number[];
}

export class CudaAllocator extends NativeAllocator {
  constructor(options: CudaAllocatorOptions = {}) {
    checkOptionKeys(options, ['device', 'peerAccess', 'limitBytes', 'trackingCapacity', 'faultInjection'], 'cuda');
    const index = options.device ?? 0;
    checkNonNegative(index, 'device');
    const device = cudaDevice(index);
    const peers = checkPeerAccess(options.peerAccess, device);
    super('cuda', device, { strategy: 'cuda', device: index, ...peerAccessSpec(peers) }, options);
  }
}
