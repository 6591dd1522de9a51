/**
 * The 'pool' strategy: a caching block pool (native) over cudaMalloc, or over host memory where
 * there is no GPU. Sizes round to 512 B; small requests share 2 MiB segments, large ones get
 * segments rounded to 2 MiB; best fit with splitting and coalescing; per-stream free lists with
 * events for cross-stream reuse and recordStream; on out-of-memory it releases cached segments and
 * retries once. Side-effect free; index.ts registers it.
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

/** The options the native pool takes as they are. */
const poolNative = {
  /** Cap on reserved bytes (default: none beyond the device's own memory). */
  maxReservedBytes: option.bytes(),
  ...poolSizeOptions,
};

const poolOptions = defineOptions('pool', {
  /** Where segments come from: 'cuda' (cudaMalloc), 'host', or 'auto' (cuda when a GPU is present; the default). */
  upstream: option.oneOf(['cuda', 'host', 'auto'], { default: 'auto' }),
  /** CUDA device ordinal for the 'cuda' upstream (default 0). */
  device: option.nonNegative({ default: 0 }),
  /**
   * CUDA devices (ordinals) that may read and write the pool's memory (the 'cuda' upstream only):
   * each gets peer access to `device` when the allocator is made (cudaDeviceEnablePeerAccess from
   * the peer's context, covering every segment). Each must be another device with a P2P path to
   * `device` (`peerTopology()`). Default: none.
   */
  peerAccess: peerAccessOption,
  ...poolNative,
  ...nativeLayerOptions,
});

/** The 'pool' strategy's options (from its options definition). */
export interface PoolAllocatorOptions extends OptionsOf<typeof poolOptions> {}

/** Where the pool's segments come from. */
export type PoolUpstream = NonNullable<PoolAllocatorOptions['upstream']>;

export class PoolAllocator extends NativeAllocator {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream: 'cuda' | 'host';

  constructor(options: PoolAllocatorOptions = {}) {
    const parsed = poolOptions.parse(options);
    const { upstream, device, index } = resolvePlacement(parsed.upstream, parsed.device);
    const peers = checkPeerAccess(parsed.peerAccess, device);
    super(
      'pool',
      device,
      { strategy: 'pool', device: index, ...peerAccessSpec(peers), options: { upstream, ...definedOptions(parsed, poolNative) } },
      options,
    );
    this.upstream = upstream;
  }
}
