/**
 * Summaries of repeated measurements, shared by the trainer, the comparison, replay and the
 * benchmarks, so every figure called a median is the same median.
 * @module
 */

/** The median (the mean of the two middle values for an even count); NaN for no values. */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/**
 * The q-quantile (0 ≤ q ≤ 1) by linear interpolation between order statistics (the common
 * "type 7" definition: numpy's and R's default); NaN for no values.
 */
export function quantile(values: readonly number[], q: number): number {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`Expected a number from 0 to 1 for q but received ${String(q)}`);
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const lo = Math.floor(position);
  const hi = Math.ceil(position);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (position - lo);
}
