/**
 * A simulated device size for replay: a strategy created as if the device had `capacityBytes`, so
 * a trace recorded on an 80 GiB card can be asked "would it fit on 16 GiB, with this allocator?".
 * @module
 */
import { totalmem } from 'node:os';
import {
  ByteBudget,
  createAllocator,
  createAllocatorWrappingLeaves,
  LimitingAdaptor,
  memoryInfo,
  NativeAllocator,
  strategyInfo,
  TrackingAllocator,
  type Allocator,
  type Device,
  type TrackingEvents,
} from '@gpumem/allocator-core';

/** A registered strategy and its options (what `--allocators pool:maxReservedBytes=1GiB` names). */
export interface StrategySpec {
  name: string;
  options?: Record<string, unknown>;
}

/**
 * How a capacity is enforced on a strategy:
 * - `native-limit`: the native limiting layer under a native strategy (`limitBytes`), which caps
 *   the bytes it takes from the driver: its reserved bytes, as a smaller GPU would.
 * - `upstream-limit`: a {@link LimitingAdaptor} under a strategy written in TypeScript, between it
 *   and the allocators it creates through the registry: the same cap on what it takes.
 * - `outer-limit`: a {@link LimitingAdaptor} over a TypeScript strategy that creates no allocator
 *   through the registry (its upstream cannot be reached): caps only the bytes it hands out, so
 *   its own overhead is not counted against the capacity.
 */
export type CapacityLimit = 'native-limit' | 'upstream-limit' | 'outer-limit';

/** An allocator made for replay, with how its capacity is enforced and its recorded events. */
export interface ReplayAllocator {
  allocator: Allocator;
  /** Set when a capacity was given. */
  limit?: CapacityLimit;
  /** Set when tracking was asked for: the recorded events, oldest first. */
  events?: () => TrackingEvents;
  /** True when it runs over address-only memory (asked for, and the strategy has the registry's `addressOnly` flag). */
  addressOnly?: boolean;
}

/** How to make a strategy for replay. */
export interface ReplayAllocatorOptions {
  /** Simulate a device of this many bytes. */
  capacityBytes?: number;
  /** Record every call in a ring of this many events (the native tracking layer, or TrackingAllocator). */
  trackingCapacity?: number;
  /**
   * Run over address-only memory where the strategy can (its registry `addressOnly` flag): the
   * leaf hands out addresses backed by nothing, so the replay takes no memory and answers the same
   * on any machine, whatever its memory or address-space limit and however large the requests. A
   * strategy without the flag is made as usual (`addressOnly` of the result says which).
   */
  addressOnly?: boolean;
}

/**
 * Creates `spec` for replay, at a simulated capacity and with tracking where asked (see
 * {@link CapacityLimit} for where the limit goes). Throws RangeError when the spec already sets
 * `limitBytes` and a capacity is given: one of them must go.
 */
export function createReplayAllocator(spec: StrategySpec, o: ReplayAllocatorOptions = {}): ReplayAllocator {
  const options = spec.options ?? {};
  const { capacityBytes, trackingCapacity } = o;
  if (capacityBytes !== undefined && options.limitBytes !== undefined) {
    throw new RangeError(`Expected either a capacity or the option limitBytes for '${spec.name}' but received both`);
  }
  const info = strategyInfo(spec.name);
  if (info.nativeLayers) {
    const addressOnly = o.addressOnly === true && info.addressOnly;
    const allocator = createAllocator(spec.name, {
      ...options,
      ...(capacityBytes !== undefined && { limitBytes: capacityBytes }),
      ...(trackingCapacity !== undefined && { trackingCapacity }),
      ...(addressOnly && { addressOnly }),
    });
    const made: ReplayAllocator = { allocator, ...(addressOnly && { addressOnly }) };
    if (capacityBytes !== undefined) made.limit = 'native-limit';
    if (trackingCapacity !== undefined) {
      if (!(allocator instanceof NativeAllocator)) {
        allocator.dispose();
        throw new TypeError(`The '${spec.name}' strategy is registered with native layers but did not create a NativeAllocator`);
      }
      made.events = () => allocator.trackingEvents();
    }
    return made;
  }
  let allocator: Allocator;
  let limit: CapacityLimit | undefined;
  if (capacityBytes === undefined) {
    allocator = createAllocator(spec.name, options);
  } else {
    // One budget for every leaf: a strategy over two upstreams still has one device.
    const budget = new ByteBudget(capacityBytes);
    const made = createAllocatorWrappingLeaves(spec.name, options, (leaf) => new LimitingAdaptor(leaf, budget, { ownsUpstream: true }));
    if (made.wrappedLeaves > 0) {
      allocator = made.allocator;
      limit = 'upstream-limit';
    } else {
      allocator = new LimitingAdaptor(made.allocator, capacityBytes, { ownsUpstream: true });
      limit = 'outer-limit';
    }
  }
  const made: ReplayAllocator = { allocator };
  if (limit !== undefined) made.limit = limit;
  if (trackingCapacity !== undefined) {
    const tracked = new TrackingAllocator(allocator, trackingCapacity, { ownsUpstream: true });
    made.allocator = tracked;
    made.events = () => tracked.trackingEvents();
  }
  return made;
}

/**
 * The largest capacity worth probing on `device`: the GPU's free memory (a replay cannot simulate
 * more than the card has), or the machine's physical memory for host strategies.
 */
export function capacityCap(device: Device): number {
  return device.kind === 'cuda' ? memoryInfo(device.index).freeBytes : totalmem();
}
