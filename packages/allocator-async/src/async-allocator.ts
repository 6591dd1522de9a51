/**
 * The 'async' strategy: cudaMallocAsync on a cudaMemPool_t it owns. The release threshold is how
 * much freed memory the pool keeps at a synchronisation point (default: all of it); trim(n)
 * gives the rest back. Reserved bytes come from the pool's own attributes.
 * Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkPeerAccess,
  cudaDevice,
  defineOptions,
  NativeAllocator,
  nativeLayerOptions,
  option,
  peerAccessOption,
  peerAccessSpec,
  type OptionsOf,
} from '@gpumem/allocator-core';

const asyncOptions = defineOptions('async', {
  /** CUDA device ordinal (default 0). */
  device: option.nonNegative({ default: 0 }),
  /**
   * CUDA devices (ordinals) that may read and write the pool's memory: set on the owned pool when
   * the allocator is made (cudaMemPoolSetAccess, read/write, for each). Each must be another device
   * with a P2P path to `device` (`peerTopology()`). Default: none.
   */
  peerAccess: peerAccessOption,
  /** Bytes of freed memory the pool keeps at a synchronisation point (default: keep everything, UINT64_MAX). */
  releaseThreshold: option.nonNegative(),
  ...nativeLayerOptions,
});

/** The 'async' strategy's options (from its options definition). */
export interface AsyncAllocatorOptions extends OptionsOf<typeof asyncOptions> {}

export class AsyncAllocator extends NativeAllocator {
  /** The release threshold; Infinity for the default (keep everything). */
  readonly releaseThreshold: number;

  constructor(options: AsyncAllocatorOptions = {}) {
    const { device: index, peerAccess, releaseThreshold } = asyncOptions.parse(options);
    const device = cudaDevice(index);
    const peers = checkPeerAccess(peerAccess, device);
    super(
      'async',
      device,
      {
        strategy: 'async',
        device: index,
        ...peerAccessSpec(peers),
        options: releaseThreshold !== undefined ? { releaseThreshold } : {},
      },
      options,
    );
    this.releaseThreshold = releaseThreshold ?? Infinity;
  }
}
