/**
 * The 'expandable' strategy: expandable segments. Each stream gets one virtual address range, and
 * physical memory is mapped into it in granules as the memory in use grows (CUDA's virtual memory
 * management: one cuMemCreate + cuMemMap per run of consecutive granules an allocation needs), so
 * blocks never have to fit a fixed segment and changing shapes do not strand reserved memory the
 * way a segment pool does. Best fit with splitting and coalescing inside each range; memory freed on
 * another stream is reused after an event; idle runs (every granule idle: a run is unmapped whole)
 * are unmapped by trim(), past `releaseThreshold`, before growing past `gcThreshold` of the
 * capacity, before reserved passes its peak (`unmapIdleBeforeGrowth`), and when a map fails (then every stream's idle runs go and the map is retried once).
 * Over host memory (no GPU) the same logic runs on an mmap reservation whose runs are committed
 * with one mprotect each. upstreamAllocCount/upstreamFreeCount/segmentCount count runs. Side-effect free; index.ts registers it.
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
  resolvePlacement,
  type OptionsOf,
} from '@gpumem/allocator-core';

/** A fraction in (0, 1]. */
function checkFraction(value: unknown, name: string): number {
  if (typeof value !== 'number') {
    throw new TypeError(`Expected a fraction in (0, 1] for ${name} but received ${String(value)} of type ${typeof value}`);
  }
  if (!(value > 0 && value <= 1)) {
    throw new RangeError(`Expected a fraction in (0, 1] for ${name} but received ${value} of type number`);
  }
  return value;
}

/** The options the native expandable strategy takes as they are. */
const expandableNative = {
  /**
   * Bytes mapped at a time. cuda: a multiple of the device's minimum granularity (default: its
   * recommended granularity, 2 MiB on current GPUs); host: a power of two of at least the page size
   * (default 2 MiB).
   */
  granuleBytes: option.bytes(),
  /** Idle mapped bytes kept over all streams; past it, idle granules are unmapped at free (default: keep everything). */
  releaseThreshold: option.nonNegative(),
  /**
   * 0 < f <= 1: before mapping past f x `capacityBytes`, idle granules are unmapped first (PyTorch's
   * garbage_collection_threshold). Off by default.
   */
  gcThreshold: option.custom(checkFraction),
  /**
   * Before mapping past the peak of reserved bytes (since resetPeak()), every stream's idle granules are unmapped
   * first (waiting on the host for the streams that used them), so that a request that fits no free
   * block reuses the memory of the holes it does not fit instead of holding it beside new granules.
   * false (the default): idle granules stay mapped until trim(), `releaseThreshold` or `gcThreshold`.
   * Each such release waits for the streams, so it suits one stream whose shapes vary (on an H100 the
   * transformer reserved 1.013x its peak allocated with it, 1.08x without, at about the same epoch time)
   * and not streams taking turns (two streams unmapped 214 runs a pass: 55.7 µs an allocation
   * against 4.4 µs; bench/RESULTS.md).
   */
  unmapIdleBeforeGrowth: option.boolean(),
  /** What gcThreshold is a fraction of (default: `limitBytes` when set, else the device's memory; host: `reserveBytes`). */
  capacityBytes: option.bytes(),
  /**
   * The virtual range reserved per stream, a multiple of the granule; no allocation can be larger
   * (default: the device's memory rounded up to a granule; host: 64 GiB).
   */
  reserveBytes: option.bytes(),
};

const expandableOptions = defineOptions('expandable', {
  /** Where granules come from: 'cuda' (CUDA VMM), 'host' (mmap), or 'auto' (cuda when a GPU is present; the default). */
  upstream: option.oneOf(['cuda', 'host', 'auto'], { default: 'auto' }),
  /** CUDA device ordinal for the 'cuda' upstream (default 0). */
  device: option.nonNegative({ default: 0 }),
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory (the 'cuda' upstream
   * only): every run of granules is mapped read/write for them as well as for `device` (their
   * CUmemAccessDesc in each cuMemSetAccess). Each must be another device with a P2P path to
   * `device` (`peerTopology()`). Default: none.
   */
  peerAccess: peerAccessOption,
  ...expandableNative,
  ...nativeLayerOptions,
});

/** The 'expandable' strategy's options (from its options definition). */
export interface ExpandableAllocatorOptions extends OptionsOf<typeof expandableOptions> {}

/** Where the granules come from. */
export type ExpandableUpstream = NonNullable<ExpandableAllocatorOptions['upstream']>;

export class ExpandableAllocator extends NativeAllocator {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream: 'cuda' | 'host';

  constructor(options: ExpandableAllocatorOptions = {}) {
    const parsed = expandableOptions.parse(options);
    const { upstream, device, index } = resolvePlacement(parsed.upstream, parsed.device);
    const peers = checkPeerAccess(parsed.peerAccess, device);
    super(
      'expandable',
      device,
      {
        strategy: 'expandable',
        device: upstream === 'cuda' ? index : -1,
        ...peerAccessSpec(peers),
        options: definedOptions(parsed, expandableNative),
      },
      options,
    );
    this.upstream = upstream;
  }
}
