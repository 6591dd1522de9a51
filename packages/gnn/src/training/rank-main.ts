/**
 * A rank of trainDistributed(), as the launcher forks it: the rank's work (rank-work.ts) with the
 * launcher's payload and the group's communicator.
 * @module
 */
import { runAsRank } from '@gpumem/distributed';
import { rankWork } from './rank-work.js';
import type { RankOutcome, RankPayload } from './train-distributed.js';

runAsRank<RankPayload, RankOutcome>((ctx) => rankWork(ctx));
