/**
 * The 'pinned' strategy: the caching block pool (native, the same code as 'pool') over mapped
 * pinned host memory. Segments come from cudaHostAlloc(cudaHostAllocMapped | cudaHostAllocPortable),
 * so kernels read and write the memory in place (the host pointer is the device pointer, checked on
 * every segment), and copies to and from it run at full link speed. Sizes round to 512 B; small
 * requests share 2 MiB segments and large ones get segments rounded to 2 MiB, not to a power of two
 * (300 MiB + 1 B reserves 302 MiB, where PyTorch's pinned allocator takes 512 MiB). Stream-ordered
 * reuse with CUDA events, recordStream, release-and-retry on out-of-memory, trim().
 *
 * Pinned pages cannot be swapped: the leaf caps what it pins at the host's MemAvailable (when the
 * allocator is created) less 10% of MemTotal, and `maxReservedBytes` lowers that cap; a request past
 * it is an OutOfMemoryError saying it would pin more than the host has available.
 *
 * Where there is no GPU, upstream 'host' (the default there) runs the same pool over plain host
 * memory. Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkBytes,
  checkOneOf,
  checkOptionKeys,
  checkPeerAccess,
  definedOptions,
  NativeAllocator,
  peerAccessSpec,
  resolvePlacement,
  type NativeLayerOptions,
} from '@gpumem/allocator-core';

export type PinnedUpstream = 'pinned' | 'host' | 'auto';

export interface PinnedAllocatorOptions extends NativeLayerOptions {
  /**
   * Where segments come from: 'pinned' (cudaHostAlloc, mapped: kernels use it in place), 'host'
   * (plain host memory: the same pool logic without a GPU), or 'auto' (pinned when a GPU is present;
   * the default).
   */
  upstream?: PinnedUpstream;
  /** The CUDA device whose streams use the memory (default 0): events for cross-stream reuse are recorded there. */
  device?: number;
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory (the 'pinned' upstream
   * only). Portable mapped pinned memory (cudaHostAllocPortable | cudaHostAllocMapped) is reachable
   * from every device already, so nothing more is done; the list is checked as for the other
   * strategies (another device, with a P2P path to `device`), so that one option works with every
   * GPU strategy. Default: none.
   */
  peerAccess?: number[];
  /**
   * Cap on reserved bytes. Over pinned memory it lowers the cap on pinned bytes (default: the host's
   * MemAvailable at creation less 10% of MemTotal); over host memory it is the pool's cap (default: none).
   */
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

const upstreams: readonly PinnedUpstream[] = ['pinned', 'host', 'auto'];

export class PinnedAllocator extends NativeAllocator {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream: 'pinned' | 'host';

  constructor(options: PinnedAllocatorOptions = {}) {
    checkOptionKeys(options, optionKeys, 'pinned');
    const requested = options.upstream ?? 'auto';
    checkOneOf(requested, upstreams, 'upstream');
    // Pinned memory is used by kernels on a device's streams: its placement is that device's.
    const placement = resolvePlacement(requested === 'pinned' ? 'cuda' : requested, options.device);
    const upstream = placement.upstream === 'cuda' ? 'pinned' : 'host';
    const sizes = ['maxReservedBytes', 'smallRequestLimit', 'smallSegmentBytes', 'largeSegmentRounding'] as const;
    for (const key of sizes) {
      if (options[key] !== undefined) checkBytes(options[key], key);
    }
    const peers = checkPeerAccess(options.peerAccess, placement.device);
    super(
      'pinned',
      placement.device,
      {
        strategy: 'pinned',
        device: placement.index,
        ...peerAccessSpec(peers),
        options: { upstream, ...definedOptions(options, sizes) },
      },
      options,
    );
    this.upstream = upstream;
  }
}
