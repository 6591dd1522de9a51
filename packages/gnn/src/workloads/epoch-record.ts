/**
 * The part of an epoch's record that every workload fills the same way.
 * @module
 */
import { mean } from '../training/train-common.js';
import type { EpochRecord } from '../training/train-types.js';

/** The epoch, its clock, its steps' losses (`loss`: their mean) and its two accuracies, in the record's order. */
export function epochRecordHead(
  epoch: number,
  startMs: number,
  epochMs: number,
  losses: ArrayLike<number>,
  trainAccuracy: number,
  accuracy: number,
): Pick<EpochRecord, 'epoch' | 'startMs' | 'epochMs' | 'loss' | 'losses' | 'trainAccuracy' | 'accuracy'> {
  return { epoch, startMs, epochMs, loss: mean(losses), losses: Array.from(losses), trainAccuracy, accuracy };
}
