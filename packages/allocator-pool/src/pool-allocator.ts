/**
 * The 'pool' strategy: a caching block pool (native) over cudaMalloc, or over host memory where
 * there is no GPU. Sizes round to 512 B; small requests share 2 MiB segments, large ones get
 * segments rounded to 2 MiB; best fit with splitting and coalescing; per-stream free lists with
 * events for cross-stream reuse and recordStream; on out-of-memory it releases cached segments and
 * retries once. Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkBytes,
  checkOptionKeys,
  checkPeerAccess,
  definedOptions,
  peerAccessSpec,
  NativeAllocator,
  resolvePlacement,
  type NativeLayerOptions,
} from '@gpumem/allocator-core';

export type PoolUpstream = 'cuda' | 'host' | 'auto';

export interface PoolAllocatorOptions extends NativeLayerOptions {
  /** Where segments come from: 'cuda' (cudaMalloc), 'host', or 'auto' (cuda when a GPU is present; the default). */
  upstream?: PoolUpstream;
  /** CUDA device ordinal for the 'cuda' upstream (default 0). */
  device?: number;
  /**
   * CUDA devices (ordinals) that may read and write the pool's memory (the 'cuda' upstream only):
   * each gets peer access to `device` when the allocator is made (cudaDeviceEnablePeerAccess from
   * the peer's context, covering every segment). Each must be another device with a P2P path to
   * `device` (`peerTopology()`). Default: none.
   */
  peerAccess?: number[];
  /** Cap on reserved bytes (default: none beyond the device's own memory). */
  maxReservedBytes?: number;
  /** Requests up to this size are small and share segments (default 1 MiB). */
  smallRequestLimit?: number;
  /** Size of the segments small requests share (default 2 MiB). */
  smallSegmentBytes?: number;
  /** Large segments are rounded up to a multiple of this (default 2 MiB). */
  largeSegmentRounding?: number;
}

const optionKeys = [
  'upstream',
  'device',
  'peerAccess',
  'maxReservedBytes',
  'smallRequestLimit',
  'smallSegmentBytes',
  'largeSegmentRounding',
  'limitBytes',
  'trackingCapacity',
  'faultInjection',
];

export class PoolAllocator extends NativeAllocator {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream: 'cuda' | 'host';

  constructor(options: PoolAllocatorOptions = {}) {
    checkOptionKeys(options, optionKeys, 'pool');
    const { upstream, device, index } = resolvePlacement(options.upstream, options.device);
    const sizes = ['maxReservedBytes', 'smallRequestLimit', 'smallSegmentBytes', 'largeSegmentRounding'] as const;
    for (const key of sizes) {
      if (options[key] !== undefined) checkBytes(options[key], key);
    }
    const peers = checkPeerAccess(options.peerAccess, device);
    super(
      'pool',
      device,
      { strategy: 'pool', device: index, ...peerAccessSpec(peers), options: { upstream, ...definedOptions(options, sizes) } },
      options,
    );
    this.upstream = upstream;
  }
}
