/**
 * "How much GPU do I need with this allocator?": the smallest simulated capacity at which a trace
 * replays without running out of memory, found by bisection, one replay pass per probe.
 * @module
 */
import { createReplayAllocator, type StrategySpec } from './capacity.js';
import { replayTrace, type CompiledTrace, type ReplayLoop } from './replay.js';

/** Where to search. */
export interface MinCapacitySearch {
  /** A capacity known not to be beaten: the trace's peak live bytes (no strategy holds less). */
  lowerBytes: number;
  /** The largest capacity to try (the GPU's free memory, a host bound, or the user's `--capacity`). */
  capBytes: number;
  /** Stop when the answer is known to within this many bytes (default 2 MiB). */
  resolutionBytes?: number;
  /**
   * A capacity likely to fit, tried first instead of doubling (the peak reserved of a pass without
   * a limit): it is probed like any other, and keeps the answer from landing above it.
   */
  hintBytes?: number;
}

/** What the search found. */
export interface MinCapacity {
  /**
   * The smallest capacity tried that replayed with no out-of-memory; the true minimum lies in
   * (`failedBytes`, `bytes`], within the resolution. Undefined when even `capBytes` ran out.
   */
  bytes?: number;
  /** The largest capacity tried that ran out of memory; undefined when the lower bound fit. */
  failedBytes?: number;
  /** True when `bytes` is the lower bound itself: no strategy can do better. */
  atLowerBound: boolean;
  /** The largest capacity the search could try. */
  capBytes: number;
  resolutionBytes: number;
  /** Replay passes made. */
  probes: number;
  /**
   * Set when the search ran more than once (on a GPU, with `repeats`): the smallest and largest
   * answer of the searches. `bytes` is then the largest, the capacity that fitted in every search;
   * undefined when a search never fitted.
   */
  bytesRange?: [number, number];
  /** Searches made: 1 on the host, where a replay is deterministic. */
  searches?: number;
}

/** The default resolution of the search: 2 MiB, the segment size of caching allocators. */
export const defaultCapacityResolution = 2 * 1024 * 1024;

/**
 * Bisects for the smallest capacity at which `fits(capacity)` holds: tries the lower bound, then
 * the hint, if any, then doubles until a capacity fits (at most `capBytes`), then halves the gap between the last failure
 * and the first fit until it is at most the resolution. Assumes that a capacity that fits is not
 * followed by a larger one that fails, which holds for strategies whose decisions do not depend
 * on the capacity until they run out.
 */
export function searchMinCapacity(fits: (capacityBytes: number) => boolean, search: MinCapacitySearch): MinCapacity {
  const resolutionBytes = search.resolutionBytes ?? defaultCapacityResolution;
  const { lowerBytes, capBytes } = search;
  for (const [name, value] of [
    ['lowerBytes', lowerBytes],
    ['capBytes', capBytes],
    ['resolutionBytes', resolutionBytes],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < (name === 'resolutionBytes' ? 1 : 0)) {
      throw new RangeError(
        `Expected a ${name === 'resolutionBytes' ? 'positive' : 'non-negative'} integer for ${name} but received ${String(value)}`,
      );
    }
  }
  let probes = 0;
  const probe = (bytes: number) => {
    probes++;
    return fits(bytes);
  };
  const base = { capBytes, resolutionBytes };
  if (lowerBytes === 0) return { ...base, bytes: 0, atLowerBound: true, probes }; // an empty trace
  if (lowerBytes > capBytes) return { ...base, atLowerBound: false, probes, failedBytes: capBytes };
  if (probe(lowerBytes)) return { ...base, bytes: lowerBytes, atLowerBound: true, probes };
  let failed = lowerBytes;
  let fit = -1;
  const double = () => Math.min(capBytes, Math.max(failed * 2, failed + resolutionBytes));
  const hint = search.hintBytes;
  let next = hint !== undefined && hint > lowerBytes && hint <= capBytes ? hint : double();
  while (fit < 0) {
    if (failed >= capBytes) return { ...base, failedBytes: failed, atLowerBound: false, probes };
    if (probe(next)) fit = next;
    else {
      failed = next;
      next = double();
    }
  }
  while (fit - failed > resolutionBytes) {
    const mid: number = failed + Math.floor((fit - failed) / 2);
    if (probe(mid)) fit = mid;
    else failed = mid;
  }
  return { ...base, bytes: fit, failedBytes: failed, atLowerBound: false, probes };
}

/** How to search one strategy. */
export interface MinCapacityOptions {
  capBytes: number;
  resolutionBytes?: number;
  /** The replay loop of each probe (default: native for native strategies). */
  loop?: ReplayLoop;
  /** A capacity likely to fit (see MinCapacitySearch.hintBytes). */
  hintBytes?: number;
  /**
   * Searches to make on a GPU (default 1), where real timing decides when a stream's freed memory
   * can be reused on another stream, so one answer can differ from the next: the result then gives
   * their spread. On the host a replay is deterministic and one search is made whatever this says.
   */
  repeats?: number;
  /** Replay over address-only memory where the strategy can (see ReplayAllocatorOptions.addressOnly). */
  addressOnly?: boolean;
}

/**
 * The smallest capacity at which `spec` replays `trace` with no out-of-memory: each probe is a
 * fresh allocator at that capacity (see createReplayAllocator) and one pass over the trace. The
 * lower bound is the trace's peak live bytes.
 */
export function findMinCapacity(trace: CompiledTrace, spec: StrategySpec, o: MinCapacityOptions): MinCapacity {
  const repeats = o.repeats ?? 1;
  if (!Number.isSafeInteger(repeats) || repeats < 1)
    throw new RangeError(`Expected positive integer for repeats but received ${String(repeats)}`);
  let onGpu = false;
  const fits = (capacityBytes: number) => {
    const { allocator } = createReplayAllocator(spec, { capacityBytes, ...(o.addressOnly === true && { addressOnly: true }) });
    try {
      onGpu = allocator.device.kind === 'cuda';
      // fits or not: the first failure decides, however many would follow
      return replayTrace(trace, allocator, { repeats: 1, stopAtFirstOom: true, ...(o.loop !== undefined && { loop: o.loop }) }).ooms === 0;
    } finally {
      allocator.dispose();
    }
  };
  const search = () =>
    searchMinCapacity(fits, {
      lowerBytes: trace.peakAllocatedBytes,
      capBytes: o.capBytes,
      ...(o.resolutionBytes !== undefined && { resolutionBytes: o.resolutionBytes }),
      ...(o.hintBytes !== undefined && { hintBytes: o.hintBytes }),
    });
  const first = search();
  if (!onGpu || repeats === 1) return { ...first, searches: 1 };
  const all = [first];
  for (let r = 1; r < repeats; r++) all.push(search());
  const probes = all.reduce((sum, m) => sum + m.probes, 0);
  const found = all.map((m) => m.bytes);
  if (found.some((b) => b === undefined)) {
    // some search never fitted under the cap: report that one
    const never = all.find((m) => m.bytes === undefined)!;
    return { ...never, probes, searches: repeats };
  }
  const bytes = found as number[];
  const largest = all[bytes.indexOf(Math.max(...bytes))]!;
  return { ...largest, probes, searches: repeats, bytesRange: [Math.min(...bytes), Math.max(...bytes)] };
}
