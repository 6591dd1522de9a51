/**
 * One run of a comparison over several devices (`devices` in the train options): the ranks of
 * trainDistributed(), one process each, started from this process, so no compare child holds them.
 * The row has the combined figures (the slowest rank's epoch times, the largest peaks and upstream
 * calls of any one device) and each device's peaks and memory over time, sampled from its
 * allocator's stats: allocation events are recorded per process, so none are here. A run that
 * fails (a rank's error, a rank that dies or stalls, a strategy the ranks cannot create) becomes an
 * error row, or an OOM row where a rank ran out of memory.
 * @module
 */
import { strategyInfo, type AllocatorStats } from '@gpumem/allocator-core';
import { RankFailedError } from '@gpumem/distributed';
import { trainDistributed, type Progress, type TrainResult } from '@gpumem/gnn';
import type { CompareTrainOptions, RunRequest } from './compare.js';
import { deviceRun, runPhases } from './devices.js';
import { failureRun, messageOf, summariseRun } from './run-summary.js';
import type { AllocatorSpec } from './spec.js';
import { builtInStrategyPackages, importStrategies } from './strategies.js';
import type { CompareRun } from './types.js';

/** True when the train options ask for several devices: a number of ranks above 1, or a list of CUDA ordinals. */
export function isDistributed(train: Pick<CompareTrainOptions, 'devices'>): boolean {
  const { devices } = train;
  return devices !== undefined && (typeof devices !== 'number' || devices > 1);
}

/** 'oom' when the first rank to fail ran out of memory, else 'error'. */
function failureStatus(e: unknown): 'oom' | 'error' {
  return e instanceof RankFailedError && /^OutOfMemoryError\b/.test(e.reason) ? 'oom' : 'error';
}

/**
 * The row of a completed run over several devices, from trainDistributed()'s result (with `ranks`):
 * the combined epochs, each device's peaks and timeline (at most `timelinePoints` points), the
 * run's epochs from the first rank's start to the last rank's end, and the upstream calls and OOMs
 * of the device with the most. `stats` are the last epoch's of the device with the highest peak.
 */
export function summariseDistributed(spec: AllocatorSpec, result: TrainResult, wallMs: number, timelinePoints: number): CompareRun {
  const ranks = result.ranks ?? [];
  const last = result.epochs.at(-1);
  if (ranks.length === 0 || !last) {
    throw new RangeError(
      `Expected a result over several devices with epochs and ranks but received ${result.epochs.length} epochs and ${ranks.length} ranks`,
    );
  }
  const devices = ranks.map((rank) => deviceRun(rank, timelinePoints));
  const finals = ranks.map((rank) => rank.epochs.at(-1)?.stats).filter((s): s is AllocatorStats => s !== undefined);
  const most = (f: (s: AllocatorStats) => number) => Math.max(...finals.map(f));
  return {
    ...summariseRun(spec, result, last.stats, wallMs, 0),
    upstreamAllocCalls: most((s) => s.upstreamAllocCount),
    upstreamFreeCalls: most((s) => s.upstreamFreeCount),
    oomCount: most((s) => s.oomCount),
    phases: runPhases(devices),
    devices,
  };
}

/**
 * Runs the request's workload over its devices on its allocator. The strategy packages and the
 * request's plug-ins are imported here first (to check the strategy and where its memory is) and
 * in every rank. As in a single-device run, CUDA graphs are used only where the strategy is
 * capturable. Never throws for a failed run.
 */
export async function runDistributed(request: RunRequest, onProgress?: (p: Progress) => void): Promise<CompareRun> {
  const { spec } = request;
  const start = performance.now();
  try {
    await importStrategies(request.plugins);
    const { tagAllocations: _tags, devices, ...train } = request.train;
    if (devices === undefined)
      throw new RangeError('Expected devices in the train options of a run over several devices but received none');
    // a strategy not registered here is named now (the ranks import no more than this process did)
    const { capturable } = strategyInfo(spec.name);
    const cudaGraph = train.cudaGraph === true && capturable;
    const result = await trainDistributed({
      ...train,
      ...(train.cudaGraph === undefined ? {} : { cudaGraph }), // unset stays unset: a workload refuses options it does not take
      allocator: spec.name,
      allocatorOptions: spec.options,
      devices,
      imports: [...builtInStrategyPackages, ...request.plugins],
      ...(onProgress ? { onProgress } : {}),
    });
    return summariseDistributed(spec, result, performance.now() - start, request.timelinePoints);
  } catch (e) {
    return failureRun(spec, failureStatus(e), messageOf(e), null, performance.now() - start);
  }
}
