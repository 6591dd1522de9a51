/**
 * The 'tiered' strategy: device memory first, then pinned host memory that kernels read and write
 * in place over the interconnect ("zero-copy"), so that a model larger than the GPU still trains.
 * Every block has a virtual range of its own (rounded up to the 2 MiB granule), backed by one
 * physical allocation on one tier through CUDA's virtual memory management, so that
 * `prefetch(ptr, n, 'host' | 'device')` moves a block between the tiers and its pointer stays the
 * same. Where a new block goes is the placement: 'auto' (the device while `deviceBudgetBytes` and
 * the driver allow, else the host), 'device' only or 'host' only, chosen per allocation tag with
 * the `placement` option (the trainer tells the allocator its tags through `setPlacementTag`).
 * Freed blocks are cached per tier and size and reused in stream order. Never managed memory.
 * Over host memory (no GPU) the same logic runs on memfd mappings (both tiers host memory).
 * Its native options and registry entry come from the native descriptor (./options.generated.ts); the
 * tag to tier map (`placement`) is TypeScript's own. Side-effect free; index.ts registers it.
 * @module
 */
import { defineNativeStrategy, describeValue, NativeStrategyAllocator, option, type OptionsOf } from '@gpumem/allocator-core';
import { tieredDescriptor } from './options.generated.js';

/** Where new blocks go: 'device' only, 'host' only, or 'auto' (the device while it has room, else the host). */
export type TierChoice = 'device' | 'host' | 'auto';

/** Where the tiers come from: 'cuda' (CUDA VMM), 'host' (the memfd twin), or 'auto' (cuda when a GPU is present). */
export type TieredUpstream = 'cuda' | 'host' | 'auto';

const tierChoices: readonly TierChoice[] = ['device', 'host', 'auto'];

/** Checks the `placement` option: a plain object of tag to 'device' | 'host' | 'auto'. */
function checkPlacementMap(value: unknown): Record<string, TierChoice> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`Expected an object of tag to 'device' | 'host' | 'auto' for placement but received ${describeValue(value)}`);
  }
  const out: Record<string, TierChoice> = {};
  for (const [tag, tier] of Object.entries(value)) {
    if (!tierChoices.includes(tier as TierChoice)) {
      throw new TypeError(`Expected one of 'device', 'host', 'auto' for placement.${tag} but received ${describeValue(tier)}`);
    }
    out[tag] = tier as TierChoice;
  }
  return out;
}

function checkTier(value: unknown, name: string): asserts value is TierChoice {
  if (!tierChoices.includes(value as TierChoice)) {
    throw new TypeError(`Expected one of 'device', 'host', 'auto' for ${name} but received ${describeValue(value)}`);
  }
}

export const tieredStrategy = defineNativeStrategy(tieredDescriptor, {
  /**
   * Allocation tag to tier: e.g. `{ graph: 'host', activations: 'host' }` keeps the trainer's graph
   * and saved activations in host memory. Tags not listed are 'auto'. On the command line:
   * `tiered:placement.graph=host:placement.activations=host`.
   */
  placement: option.custom(checkPlacementMap, { default: {} }),
});

/** The 'tiered' strategy's options (from its native descriptor, and the tag to tier map). */
export interface TieredAllocatorOptions extends OptionsOf<typeof tieredStrategy.options> {}

export class TieredAllocator extends NativeStrategyAllocator<typeof tieredStrategy> {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream = this.resolvedUpstream;
  /** The tag to tier map (tags not listed are 'auto'). */
  readonly placement: Readonly<Record<string, TierChoice>> = Object.freeze({ ...this.parsed.placement });
  #tier: TierChoice = 'auto';

  constructor(options: TieredAllocatorOptions = {}) {
    super(tieredStrategy, options);
  }

  /**
   * The trainer's allocation tag ('setup', 'forward', 'graph', 'activations', ...): allocations from
   * now on go to the tier `placement` names for it ('auto' when it names none).
   */
  setPlacementTag(tag: string): void {
    this.checkLive();
    if (typeof tag !== 'string') throw new TypeError(`Expected a string for tag but received ${describeValue(tag)}`);
    this.setPlacement(Object.hasOwn(this.placement, tag) ? this.placement[tag]! : 'auto');
  }

  /** Where allocations go from now on, whatever the tag: 'device' only, 'host' only, or 'auto'. */
  setPlacement(tier: TierChoice): void {
    this.checkLive();
    checkTier(tier, 'tier');
    if (tier === this.#tier) return;
    this.callNative((r) => r.setPlacement(tier));
    this.#tier = tier;
  }

  /** The placement in force. */
  get currentPlacement(): TierChoice {
    return this.#tier;
  }
}
