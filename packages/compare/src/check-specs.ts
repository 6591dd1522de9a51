/**
 * Allocator specs checked before any run: each spec that carries options (or whose strategy cannot
 * be made without them, e.g. 'plugin') is checked once, in this process, by its strategy's
 * registered check (checkAllocatorOptions: for a native strategy, the native core's own check of
 * its options), which makes no allocator and touches no device; so a bad option fails the command
 * at once instead of when that allocator's turn comes, and this process holds no CUDA context while
 * the runs' processes work. A strategy without such a check (a plug-in's strategy written in
 * TypeScript) has its options checked by its run, which reports what it refuses.
 * @module
 */
import { checkAllocatorOptions, hasAllocator, strategyInfo } from '@gpumem/allocator-core';
import type { AllocatorSpec } from './spec.js';

/** A spec the strategy refused, and why. */
export interface SpecProblem {
  label: string;
  message: string;
}

/** True when checking can tell something about the spec: it has options, or its strategy needs some. */
function worthChecking(spec: AllocatorSpec): boolean {
  return hasAllocator(spec.name) && (Object.keys(spec.options).length > 0 || strategyInfo(spec.name).requiresOptions);
}

/** Checks each spec's options (nothing made); returns the specs whose options were refused. */
export function specProblems(specs: readonly AllocatorSpec[]): SpecProblem[] {
  const problems: SpecProblem[] = [];
  for (const spec of specs.filter(worthChecking)) {
    try {
      checkAllocatorOptions(spec.name, spec.options);
    } catch (e) {
      if (e instanceof TypeError || e instanceof RangeError) problems.push({ label: spec.label, message: e.message });
    }
  }
  return problems;
}
