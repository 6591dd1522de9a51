/**
 * The GCN's full-batch epoch on one rank of several: the graph split by rows (GraphPart), the
 * model's collectives through the rank's communicator (PartitionedGcn). Each rank's records hold
 * its own rows' share: the launcher's side sums them into the run's (see combineRanks).
 * @module
 */
import type { Communicator } from '@gpumem/distributed';
import type { Runtime } from '../../framework/runtime.js';
import { gcnDefaults } from './defaults.js';
import { Adam, softmaxCrossEntropy } from '../../framework/nn.js';
import { PartitionedGcn } from '../../models/gcn-partitioned.js';
import type { GraphPart } from '../../datasets/graph-part.js';
import { beginEpoch, endFullBatchStep } from '../../training/train-common.js';
import type { EpochRecord, RankShare } from '../../training/train-types.js';
import type { GcnTrainOptions } from './options.js';
import { epochRecordHead } from '../epoch-record.js';
import { correctInRows } from './correct-rows.js';

/** This rank's part of the run, ready for its epochs: each epoch's record holds its share of the loss and counts; dispose() frees the part too. */
export function preparePartitionedGcn(
  rt: Runtime,
  o: GcnTrainOptions,
  part: GraphPart,
  hidden: number,
  epochs: number,
  seed: number,
  comm: Communicator,
): { parameters: number; trainEpoch(epoch: number): EpochRecord & { share: RankShare }; dispose(): void } {
  const model = new PartitionedGcn(rt, comm, part.numFeatures, hidden, part.numClasses, o.dropout ?? gcnDefaults.dropout, seed);
  const optimizer = new Adam(rt, model.params, o.lr ?? gcnDefaults.lr);
  const n = part.numNodes;
  // this rank's rows of the training mask [0, trainNodes) and of the rest
  const trainRows = Math.max(0, Math.min(part.trainNodes - part.start, part.count));
  const restRows = part.count - trainRows;
  const weight = part.trainNodes > 0 ? trainRows / part.trainNodes : 0;
  return {
    parameters: model.params.size,
    trainEpoch(epoch) {
      const begun = beginEpoch(rt);
      const scalars = rt.scope(() => {
        const out = rt.zeros([2], 'i32'); // [loss as f32 bits, correct] of this rank's training rows
        rt.tag('forward');
        const logits = model.forward(part, true, seed + 7, epoch * n * hidden);
        rt.tag('loss');
        const dLogits =
          trainRows > 0 ? softmaxCrossEntropy(rt, logits, part.labels, trainRows, out.ptr, out.ptr + 4) : rt.zeros(logits.shape);
        logits.dispose();
        rt.tag('backward');
        model.backward(dLogits, part, weight);
        rt.tag('optimizer');
        optimizer.step();
        return rt.keep(out);
      });
      const { epochMs, stats, loss, correct } = endFullBatchStep(rt, o, epoch, begun, scalars);
      rt.tag('validation');
      const evalCorrect = evaluate(rt, model, part, trainRows, restRows, seed);
      const record = {
        ...epochRecordHead(
          epoch,
          begun.t0,
          epochMs,
          [loss],
          trainRows > 0 ? correct / trainRows : 0,
          restRows > 0 ? evalCorrect / restRows : 0,
        ),
        ...stats,
        share: { lossWeights: [weight], trainCorrect: correct, trainCount: trainRows, evalCorrect, evalCount: restRows },
      };
      o.onProgress?.({ epoch, epochs, step: 1, steps: 1 });
      return record;
    },
    dispose() {
      rt.synchronize();
      optimizer.dispose();
      model.dispose();
      part.dispose();
    },
  };
}

/** Correct predictions among this rank's rows outside the training mask (every rank runs the forward: it has collectives). */
function evaluate(rt: Runtime, model: PartitionedGcn, part: GraphPart, trainRows: number, restRows: number, seed: number): number {
  return rt.scope(() => {
    const logits = model.forward(part, false, seed, 0);
    return restRows === 0 ? 0 : correctInRows(rt, logits, part.labels, trainRows, restRows, part.numClasses);
  });
}
