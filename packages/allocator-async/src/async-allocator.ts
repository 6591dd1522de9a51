/**
 * The 'async' strategy: cudaMallocAsync on a cudaMemPool_t it owns. The release threshold is how
 * much freed memory the pool keeps at a synchronisation point (default: all of it); trim(n)
 * gives the rest back. Reserved bytes come from the pool's own attributes.
 * Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkNonNegative,
  checkOptionKeys,
  checkPeerAccess,
  cudaDevice,
  NativeAllocator,
  peerAccessSpec,
  type NativeLayerOptions,
} from '@gpumem/allocator-core';

export interface AsyncAllocatorOptions extends NativeLayerOptions {
  /** CUDA device ordinal (default 0). */
  device?: number;
  /**
   * CUDA devices (ordinals) that may read and write the pool's memory: set on the owned pool when
   * the allocator is made (cudaMemPoolSetAccess, read/write, for each). Each must be another device
   * with a P2P path to `device` (`peerTopology()`). Default: none.
   */
  peerAccess?: number[];
  /** Bytes of freed memory the pool keeps at a synchronisation point (default: keep everything, UINT64_MAX). */
  releaseThreshold?: number;
}

export class AsyncAllocator extends NativeAllocator {
  /** The release threshold; Infinity for the default (keep everything). */
  readonly releaseThreshold: number;

  constructor(options: AsyncAllocatorOptions = {}) {
    checkOptionKeys(options, ['device', 'peerAccess', 'releaseThreshold', 'limitBytes', 'trackingCapacity', 'faultInjection'], 'async');
    const index = options.device ?? 0;
    checkNonNegative(index, 'device');
    if (options.releaseThreshold !== undefined) checkNonNegative(options.releaseThreshold, 'releaseThreshold');
    const device = cudaDevice(index);
    const peers = checkPeerAccess(options.peerAccess, device);
    super(
      'async',
      device,
      {
        strategy: 'async',
        device: index,
        ...peerAccessSpec(peers),
        options: options.releaseThreshold !== undefined ? { releaseThreshold: options.releaseThreshold } : {},
      },
      options,
    );
    this.releaseThreshold = options.releaseThreshold ?? Infinity;
  }
}
