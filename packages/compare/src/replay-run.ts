/**
 * `gpumem replay`'s run: a trace replayed through each allocator in turn (replayStrategy), the
 * recorded allocator's row where the trace has one (a PyTorch snapshot), and the recommendation
 * from the rows that finished, or, when none did, one line saying why. The command line reads the
 * trace and prints; this decides what is run and what the result says.
 * @module
 */
import {
  pytorchBaseline,
  recommendStrategy,
  replayStrategy,
  type Advice,
  type CompiledTrace,
  type ReadTrace,
  type RecordedBaseline,
  type SkippedStrategy,
  type StrategyReplay,
  type StrategyReplayOptions,
} from '@gpumem/trace';
import type { AllocatorSpec } from './spec.js';
import { noneFinishedLine } from './replay-table.js';

/** How each allocator is replayed, and what the recommendation is told of the run. */
export interface ReplayRunOptions extends StrategyReplayOptions {
  /** Precision of the minimum-capacity search (the table's notes name it). */
  resolutionBytes: number;
  /** Allocators not replayed at all (no GPU), and why: the recommendation names them. */
  skipped: readonly SkippedStrategy[];
  /** Whether the replay runs on a GPU (without one, device strategies run on their host twins). */
  gpu: boolean;
  /** Called as each allocator's row is done (the command line's --progress). */
  onRow?(row: StrategyReplay, index: number, count: number): void;
}

/** What a replay found: a row per allocator, the recorded allocator's, and the recommendation. */
export interface ReplayRun {
  rows: StrategyReplay[];
  /** The allocator the trace was recorded under (PyTorch's, from a snapshot), when known. */
  baseline?: RecordedBaseline;
  /** The recommendation; when no allocator finished, its one line says why (noneFinished). */
  advice: Advice;
  /** Set when no allocator finished: what happened, in one line. */
  noneFinished?: string;
}

/** Replays `compiled` (read as `trace`) through each allocator of `specs`, one after another. */
export function replayAllocators(
  trace: ReadTrace,
  compiled: CompiledTrace,
  specs: readonly AllocatorSpec[],
  o: ReplayRunOptions,
): ReplayRun {
  const { skipped, gpu, onRow, ...replay } = o;
  const baseline = pytorchBaseline(trace, compiled);
  const rows = specs.map((spec, i) => {
    const row = replayStrategy(compiled, spec, replay);
    onRow?.(row, i, specs.length);
    return row;
  });
  const advice = recommendStrategy(rows, {
    minCapacity: o.minCapacity === true,
    ...(o.capacityBytes !== undefined && { capacityBytes: o.capacityBytes }),
    ...(baseline && { baseline }),
    skipped,
    gpu,
  });
  const noneFinished = noneFinishedLine(rows);
  return {
    rows,
    ...(baseline && { baseline }),
    advice: noneFinished !== undefined ? { ...advice, lines: [noneFinished] } : advice,
    ...(noneFinished !== undefined && { noneFinished }),
  };
}
