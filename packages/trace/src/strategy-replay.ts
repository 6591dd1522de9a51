/**
 * Everything `gpumem replay` measures of one strategy on one trace: the timed passes, the tracked
 * pass (fragmentation at the peak, driver calls, memory at each out-of-memory failure) and, when
 * asked, the minimum capacity. A failure becomes the row's error, never an exception, so one
 * strategy that cannot run leaves the others' rows standing.
 * @module
 */
import { formatBytes, hasAllocator, hasCudaDevice, memoryInfo, strategyInfo } from '@gpumem/allocator-core';
import { addressSpaceRoom, type AddressSpaceRoom } from './address-space.js';
import { strategyMemory, type StrategyMemory } from './advice.js';
import { capacityCap, createReplayAllocator, type CapacityLimit, type StrategySpec } from './capacity.js';
import { defaultCapacityResolution, findMinCapacity, type MinCapacity } from './min-capacity.js';
import { profileReplay, type ReplayProfile } from './profile.js';
import { replayTrace, type CompiledTrace, type ReplayLoop, type ReplayResult } from './replay.js';

/** A strategy to replay, and the label its row is reported under (the spec as written). */
export interface LabelledStrategySpec extends StrategySpec {
  label: string;
}

/** How to replay each strategy. */
export interface StrategyReplayOptions {
  /** Timed passes over the trace; times are the median. */
  repeats: number;
  /** The loop of the timed passes and the search's probes (default: native for native strategies). */
  loop?: ReplayLoop;
  /** Replay as if the device had this many bytes; also the cap of the minimum-capacity search. */
  capacityBytes?: number;
  /** Search for the smallest capacity with no out-of-memory. */
  minCapacity?: boolean;
  /** Precision of the search (default {@link defaultCapacityResolution}). */
  resolutionBytes?: number;
}

/** One strategy's replay: its results, or the error that stopped it. */
export interface StrategyReplay {
  /** The strategy as given, with its options. */
  label: string;
  /** What stopped it (`RangeError: ...`); the fields below are those measured before it, if any. */
  error?: string;
  /** Where its memory lives: a device strategy made over host memory on a GPU keeps host memory. */
  memory?: StrategyMemory;
  /** The timed replay. */
  result?: ReplayResult;
  /** How the capacity was enforced, when one was given. */
  limit?: CapacityLimit;
  /** The tracked pass: timeline, fragmentation at peak, driver calls, memory at each OOM. */
  profile?: ReplayProfile;
  /** The minimum capacity, when it was searched. */
  minCapacity?: MinCapacity;
  /**
   * Set when the process's address space is limited (RLIMIT_AS) and no capacity was given: a
   * strategy over host memory was replayed at `roomBytes` as its capacity, so that it cannot take
   * the room the JavaScript engine needs (see address-space.ts).
   */
  addressSpace?: AddressSpaceRoom;
  /** Wall time of everything done for the row, ms. */
  wallMs?: number;
}

/**
 * Replays `compiled` through `spec`: the timed passes (at the simulated capacity, when given), one
 * tracked pass, and the minimum-capacity search when asked. On a GPU, a strategy over managed
 * memory is refused (an error row) when the trace's peak is more than the card has free, since a
 * replay must not oversubscribe the GPU.
 */
export function replayStrategy(compiled: CompiledTrace, spec: LabelledStrategySpec, o: StrategyReplayOptions): StrategyReplay {
  const start = performance.now();
  const label = spec.label;
  try {
    if (hasAllocator(spec.name) && strategyInfo(spec.name).managedMemory && hasCudaDevice()) {
      // Managed memory can oversubscribe the GPU; a replay never asks for more than the card has free.
      const { freeBytes } = memoryInfo(0);
      if (compiled.peakAllocatedBytes > freeBytes) {
        return {
          label,
          error: `the trace's peak (${formatBytes(compiled.peakAllocatedBytes)}) is more than the GPU's free memory (${formatBytes(freeBytes)}); replaying it through managed memory would oversubscribe the GPU`,
        };
      }
    }
    // Under an address-space limit, a strategy over host memory gets the room left as its capacity.
    const room = o.capacityBytes === undefined && overHostMemory(spec) ? addressSpaceRoom() : undefined;
    const capacityBytes = o.capacityBytes ?? (room && room.roomBytes >= compiled.largestRequestBytes ? room.roomBytes : undefined);
    const capacity = capacityBytes !== undefined ? { capacityBytes } : {};
    const made = createReplayAllocator(spec, capacity);
    const device = made.allocator.device;
    // On a GPU, a device strategy made over host memory (pool:upstream=host) keeps host memory too.
    const memory = hasCudaDevice() && device.kind === 'host' ? 'host' : strategyMemory(spec.name);
    const row: StrategyReplay = { label, memory };
    if (room !== undefined && capacityBytes !== undefined) row.addressSpace = room;
    try {
      row.result = replayTrace(compiled, made.allocator, { repeats: o.repeats, ...(o.loop !== undefined && { loop: o.loop }) });
    } finally {
      made.allocator.dispose();
    }
    if (made.limit !== undefined) row.limit = made.limit;
    row.profile = profileReplay(compiled, spec, capacity);
    if (o.minCapacity) {
      row.minCapacity = findMinCapacity(compiled, spec, {
        capBytes: capacityBytes ?? capacityCap(device),
        resolutionBytes: o.resolutionBytes ?? defaultCapacityResolution,
        ...(o.loop !== undefined && { loop: o.loop }),
        // What the tracked pass reserved fits unless it ran out of memory: a good first guess.
        ...(row.profile.ooms === 0 && { hintBytes: row.profile.peakReservedBytes }),
        // on a GPU, real timing can change the answer: the spread over as many searches as timed passes
        repeats: o.repeats,
      });
    }
    row.wallMs = performance.now() - start;
    return row;
  } catch (e) {
    return { label, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e), wallMs: performance.now() - start };
  }
}

/** True when `spec` keeps host memory: every native strategy on a host without a GPU (their host twins), else the host strategies. */
function overHostMemory(spec: StrategySpec): boolean {
  if (!hasCudaDevice()) return true;
  return hasAllocator(spec.name) && strategyMemory(spec.name) === 'host';
}
