/**
 * The allocators a command runs when none are named: one rule for `gpumem compare` and
 * `gpumem replay`, from the registry's capability flags alone.
 * @module
 */
import { listAllocators, strategyLabel, type StrategyInfo } from '@gpumem/allocator-core';
import type { SkippedStrategy } from '@gpumem/trace';
import type { AllocatorSpec } from './spec.js';

/** Why a strategy that needs a GPU was left out of the default list. */
export const noCudaDeviceReason = 'no CUDA device';

/** Why a strategy over host memory was left out of a default list whose runs compute on a GPU. */
export const hostMemoryOnGpuReason = 'keeps its memory on the host, so its run would use the CPU kernels; name it to include it';

/** What the default list is for. */
export interface DefaultAllocatorsOptions {
  /** Whether a CUDA device is here. */
  gpu: boolean;
  /**
   * Whether each allocator's run computes on the memory it hands out (training a model: true), or
   * only allocates and frees it (replaying a trace: false). On a GPU, a strategy that keeps its
   * memory on the host (the `hostMemory` flag) would make a computing run use the CPU kernels, so
   * its times would compare kernels rather than allocators: it is left out. A replay runs no
   * kernels, and a host strategy's peak, fragmentation and minimum capacity are as meaningful as a
   * device strategy's (the recommendation ranks them apart): it is kept.
   */
  runsKernels: boolean;
  /** The registered strategies (default: the registry's list, in its order). */
  strategies?: readonly StrategyInfo[];
}

/** The default list, and the strategies left out of it with why (those needing options are not named). */
export interface DefaultAllocators {
  specs: AllocatorSpec[];
  skipped: SkippedStrategy[];
}

/**
 * Every registered strategy that can run here, with no options, each labelled by its name (and the
 * allocator it reproduces, where it says: {@link strategyLabel}):
 * - a strategy that cannot be created without options (`requiresOptions`) runs only when named;
 * - a strategy that needs a GPU (`requiresCuda`) is skipped when there is none;
 * - on a GPU, a strategy over host memory (`hostMemory`) is skipped when the runs compute
 *   (see {@link DefaultAllocatorsOptions.runsKernels}), and kept otherwise.
 * Without a GPU, host strategies always run (device strategies run on their host twins beside them).
 */
export function defaultAllocators(o: DefaultAllocatorsOptions): DefaultAllocators {
  const specs: AllocatorSpec[] = [];
  const skipped: SkippedStrategy[] = [];
  for (const s of o.strategies ?? listAllocators()) {
    if (s.requiresOptions) continue;
    if (s.requiresCuda && !o.gpu) skipped.push({ label: s.name, reason: noCudaDeviceReason });
    else if (s.hostMemory && o.gpu && o.runsKernels) skipped.push({ label: s.name, reason: hostMemoryOnGpuReason });
    else specs.push({ label: strategyLabel(s), name: s.name, options: {} });
  }
  return { specs, skipped };
}
