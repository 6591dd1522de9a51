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
  checkPeerAccess,
  defineOptions,
  definedOptions,
  NativeAllocator,
  nativeLayerOptions,
  option,
  peerAccessOption,
  peerAccessSpec,
  poolSizeOptions,
  resolvePlacement,
  type OptionsOf,
} from '@gpumem/allocator-core';

/** The options the native pool under 'pinned' takes as they are. */
const pinnedNative = {
  /**
   * Cap on reserved bytes. Over pinned memory it lowers the cap on pinned bytes (default: the host's
   * MemAvailable at creation less 10% of MemTotal); over host memory it is the pool's cap (default: none).
   */
  maxReservedBytes: option.bytes(),
  ...poolSizeOptions,
};

const pinnedOptions = defineOptions('pinned', {
  /**
   * Where segments come from: 'pinned' (cudaHostAlloc, mapped: kernels use it in place), 'host'
   * (plain host memory: the same pool logic without a GPU), or 'auto' (pinned when a GPU is present;
   * the default).
   */
  upstream: option.oneOf(['pinned', 'host', 'auto'], { default: 'auto' }),
  /** The CUDA device whose streams use the memory (default 0): events for cross-stream reuse are recorded there. */
  device: option.nonNegative({ default: 0 }),
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory (the 'pinned' upstream
   * only). Portable mapped pinned memory (cudaHostAllocPortable | cudaHostAllocMapped) is reachable
   * from every device already, so nothing more is done; the list is checked as for the other
   * strategies (another device, with a P2P path to `device`), so that one option works with every
   * GPU strategy. Default: none.
   */
  peerAccess: peerAccessOption,
  ...pinnedNative,
  ...nativeLayerOptions,
});

/** The 'pinned' strategy's options (from its options definition). */
export interface PinnedAllocatorOptions extends OptionsOf<typeof pinnedOptions> {}

/** Where the segments come from. */
export type PinnedUpstream = NonNullable<PinnedAllocatorOptions['upstream']>;

export class PinnedAllocator extends NativeAllocator {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream: 'pinned' | 'host';

  constructor(options: PinnedAllocatorOptions = {}) {
    const parsed = pinnedOptions.parse(options);
    const requested = parsed.upstream;
    // Pinned memory is used by kernels on a device's streams: its placement is that device's.
    const placement = resolvePlacement(requested === 'pinned' ? 'cuda' : requested, parsed.device);
    const upstream = placement.upstream === 'cuda' ? 'pinned' : 'host';
    const peers = checkPeerAccess(parsed.peerAccess, placement.device);
    super(
      'pinned',
      placement.device,
      {
        strategy: 'pinned',
        device: placement.index,
        ...peerAccessSpec(peers),
        options: { upstream, ...definedOptions(parsed, pinnedNative) },
      },
      options,
    );
    this.upstream = upstream;
  }
}
