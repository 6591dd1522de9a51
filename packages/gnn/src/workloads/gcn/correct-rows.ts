/**
 * The gcn's validation count: correct predictions among a range of a graph's rows.
 * @module
 */
import type { Runtime } from '../../framework/runtime.js';
import type { Tensor } from '../../framework/tensor.js';

/** How many of rows [first, first + count) of logits ([rows, classes]) predict their label (i32 per row); count > 0. */
export function correctInRows(rt: Runtime, logits: Tensor, labels: Tensor, first: number, count: number, classes: number): number {
  const correct = rt.zeros([1], 'i32');
  rt.ops.accuracy(rt.onDevice, rt.s, logits.rows(first, count).ptr, labels.rows(first, count).ptr, 0, count, count, classes, correct.ptr);
  return correct.toArray()[0] ?? 0;
}
