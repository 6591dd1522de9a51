/**
 * How far repeated measurements of one run spread, and when one run is better than another beyond
 * that spread: a comparison marks a best only where the ranges do not overlap.
 * @module
 */
import { median, quantile } from '@gpumem/allocator-core';

/** The spread of a run's measured epochs (the warm-up epoch left out). */
export interface Spread {
  /** Measurements summarised. */
  n: number;
  min: number;
  /** First and third quartiles (linear interpolation). */
  q1: number;
  median: number;
  q3: number;
  max: number;
}

/** The spread of `values`; null for none. */
export function spreadOf(values: readonly number[]): Spread | null {
  if (values.length === 0) return null;
  return {
    n: values.length,
    min: Math.min(...values),
    q1: quantile(values, 0.25),
    median: median(values),
    q3: quantile(values, 0.75),
    max: Math.max(...values),
  };
}

/**
 * Differences smaller than this share of the values are never called a win: two runs whose epochs
 * all took 36.4 ms are tied even when their tiny ranges happen not to touch.
 */
export const tieTolerance = 0.01;

/**
 * From this many measurements a spread is compared by its interquartile range; below, by min–max
 * (too few for quartiles to mean much).
 */
export const quartilesFrom = 8;

/**
 * True when two spreads overlap, so neither is better beyond the noise. Ranges are min–max for
 * fewer than {@link quartilesFrom} measurements, the interquartile range from there, each widened
 * by {@link tieTolerance} of its values.
 */
export function spreadsOverlap(a: Spread, b: Spread): boolean {
  const range = (s: Spread): [number, number] => {
    const [lo, hi] = s.n < quartilesFrom ? [s.min, s.max] : [s.q1, s.q3];
    return [lo * (1 - tieTolerance), hi * (1 + tieTolerance)];
  };
  const [aLo, aHi] = range(a);
  const [bLo, bHi] = range(b);
  return aLo <= bHi && bLo <= aHi;
}

/** Epochs counted as warm-up (left out of medians and spreads): the first, when there is more than one. */
export function warmupEpochsOf(epochCount: number): number {
  return epochCount >= 2 ? 1 : 0;
}

/**
 * Measured epochs (after each run's warm-up) a row needs before its time may be called better than
 * another's. Two allocators whose epochs take the same time have min–max ranges that miss each other
 * by chance with probability 2 / C(2n, n) for n epochs each: 1 for n = 1 (a lone epoch never
 * overlaps another), 1/3 for 2, 1/10 for 3, 1/35 for 4 and 1/126 (0.8%) for 5. From 5, a winner
 * named is a real difference at least 99 times in 100; the default comparison (3 epochs, 3
 * repeats) measures 6.
 */
export const minMeasuredEpochs = 5;

/**
 * The epochs of a row measured after their run's warm-up: none where each run had one epoch only
 * (its one time includes the warm-up: first-call costs, the allocator's first growth).
 */
export function epochsAfterWarmup(run: { warmupEpochs?: number; epochSpread?: Spread | null }): number {
  return (run.warmupEpochs ?? 0) > 0 ? (run.epochSpread?.n ?? 0) : 0;
}

/** What a row's time lacks to be ranked: "not enough samples (1 measured epoch, at least 5 needed)". */
export function notEnoughSamplesText(measured: number): string {
  return `not enough samples (${measured} measured epoch${measured === 1 ? '' : 's'} after the warm-up, at least ${minMeasuredEpochs} needed)`;
}
