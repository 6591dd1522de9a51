/**
 * The allocator a trace was recorded under, as a baseline of the replayed strategies: a PyTorch
 * snapshot (`torch.cuda.memory._dump_snapshot()`) carries what PyTorch's caching allocator itself
 * reserved over time and how many segments it took from and gave back to the driver, so its row
 * sits in the same table as the strategies replayed here.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import type { ReadTrace } from './format.js';
import type { CompiledTrace } from './replay.js';

/** The label of PyTorch's row. */
export const pytorchBaselineLabel = 'PyTorch caching allocator (recorded)';

/** What a recorded allocator did on the trace's program. */
export interface RecordedBaseline {
  label: string;
  peakReservedBytes: number;
  /**
   * The most bytes the program held, a block counting until PyTorch could hand it out again
   * (`free_completed`: a block freed on a stream whose work still used it waits for that work), as
   * the replayed strategies count it.
   */
  peakAllocatedBytes: number;
  /**
   * The same with a block counting only until the program freed it (`free_requested`), as
   * `torch.cuda.max_memory_allocated()` does; absent where the trace does not say.
   */
  peakAllocatedAtFreeRequestBytes?: number;
  /** Why peakAllocatedBytes is not what `torch.cuda.max_memory_allocated()` said, when it is not. */
  peakAllocatedNote?: string;
  /** Driver calls: segments allocated (cudaMalloc) and freed (cudaFree). */
  driverAllocs: number;
  driverFrees: number;
  /** Reserved bytes over the trace's time (ns since its first event), as recorded. */
  reservedTimeline: { timeNs: number[]; reservedBytes: number[] };
  /** The bytes allocated at the moment of peak reserved, from the trace's own requests. */
  allocatedAtPeakBytes: number;
  /** Reserved minus allocated at that moment. */
  fragmentationAtPeakBytes: number;
}

/** The `pytorch` part of a trace read from a PyTorch snapshot (see the snapshot reader). */
interface PytorchSummary {
  reservedTimeline: { timeNs: number[]; reservedBytes: number[] };
  peakReservedBytes: number;
  peakAllocatedBytes: number;
  peakAllocatedAtFreeRequestBytes?: number;
  segmentAllocs: number;
  segmentFrees: number;
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;

function summaryOf(trace: ReadTrace): PytorchSummary | undefined {
  const p = (trace as ReadTrace & { pytorch?: unknown }).pytorch;
  if (p === null || typeof p !== 'object') return undefined;
  const s = p as Partial<PytorchSummary>;
  const tl = s.reservedTimeline;
  if (!tl || !Array.isArray(tl.timeNs) || !Array.isArray(tl.reservedBytes) || tl.timeNs.length !== tl.reservedBytes.length)
    return undefined;
  if (![s.peakReservedBytes, s.peakAllocatedBytes, s.segmentAllocs, s.segmentFrees].every(isCount)) return undefined;
  return s as PytorchSummary;
}

/**
 * The bytes live after every operation of the compiled trace up to `timeNs` (its last operation at
 * or before that time), i.e. what the program held then.
 */
function liveBytesAt(trace: CompiledTrace, timeNs: number): number {
  let live = 0;
  for (let i = 0; i < trace.action.length && trace.timeNs[i]! <= timeNs; i++)
    live += trace.action[i] === 0 ? trace.bytes[i]! : -trace.bytes[i]!;
  return live;
}

/**
 * PyTorch's caching allocator as a baseline row, when `trace` was read from a PyTorch snapshot that
 * carries its statistics; undefined otherwise.
 */
export function pytorchBaseline(trace: ReadTrace, compiled: CompiledTrace): RecordedBaseline | undefined {
  const s = summaryOf(trace);
  if (s === undefined) return undefined;
  const { timeNs, reservedBytes } = s.reservedTimeline;
  let peakIndex = -1;
  for (let i = 0; i < reservedBytes.length; i++) if (peakIndex < 0 || reservedBytes[i]! > reservedBytes[peakIndex]!) peakIndex = i;
  const reservedAtPeak = peakIndex < 0 ? s.peakReservedBytes : reservedBytes[peakIndex]!;
  const allocatedAtPeak = peakIndex < 0 ? 0 : liveBytesAt(compiled, timeNs[peakIndex]!);
  const baseline: RecordedBaseline = {
    label: pytorchBaselineLabel,
    peakReservedBytes: s.peakReservedBytes,
    peakAllocatedBytes: s.peakAllocatedBytes,
    driverAllocs: s.segmentAllocs,
    driverFrees: s.segmentFrees,
    reservedTimeline: { timeNs: [...timeNs], reservedBytes: [...reservedBytes] },
    allocatedAtPeakBytes: allocatedAtPeak,
    fragmentationAtPeakBytes: Math.max(0, reservedAtPeak - allocatedAtPeak),
  };
  const atRequest = s.peakAllocatedAtFreeRequestBytes;
  if (isCount(atRequest)) {
    baseline.peakAllocatedAtFreeRequestBytes = atRequest;
    baseline.peakAllocatedNote = peakAllocatedNote(s.peakAllocatedBytes, atRequest);
  }
  return baseline;
}

/**
 * The note beside PyTorch's peak allocated: it counts a block until its free completed, which is
 * when the memory could be reused, while `max_memory_allocated()` stops counting at the free call.
 */
function peakAllocatedNote(untilCompleted: number, untilRequested: number): string {
  const rule =
    'peak allocated counts a block until its free completed (free_completed: a block freed on a stream waits for the work queued there), when the memory could be handed out again, as every replayed strategy sees it';
  const torch = 'torch.cuda.max_memory_allocated() stops counting at the free call (free_requested)';
  if (untilCompleted === untilRequested) return `${rule}; ${torch}, which makes no difference on this trace.`;
  return `${rule}; ${torch}: ${formatBytes(untilRequested)} on this trace (in requested bytes; PyTorch rounds each block up to 512 B).`;
}
