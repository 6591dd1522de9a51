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
