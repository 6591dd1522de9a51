/**
 * @gpumem/trace: allocation traces (gpumem's JSONL, RMM's logging CSV, PyTorch's memory snapshots),
 * conversion from tracking events, and replay of a trace through any allocator.
 * @packageDocumentation
 */
export {
  readTrace,
  parseTrace,
  writeTrace,
  serializeTrace,
  traceLines,
  readLines,
  formatFromPath,
  traceFileFormats,
  traceFormatMarker,
  traceFormatVersion,
  rmmCsvHeader,
  maxTraceLineChars,
  isGzip,
  maxDecompressedTraceBytes,
  maxBlankTraceLines,
  TraceFormatError,
  TraceFileError,
  TraceBudgetError,
  defaultMaxTraceEvents,
  maxTraceEventsVariable,
  type AllocationTrace,
  type TraceHeader,
  type TraceEvent,
  type TraceAction,
  type TraceFileFormat,
  type ReadTrace,
  type ReadTraceFormat,
  type ReadTraceOptions,
} from './format.js';
export {
  readSnapshot,
  parseSnapshot,
  isInternalFrame,
  defaultMaxFrameTags,
  otherFrameTag,
  SnapshotFormatError,
  type SnapshotTrace,
  type SnapshotHeader,
  type SnapshotDetails,
  type SnapshotOom,
  type SnapshotOptions,
  type PytorchSnapshotSummary,
} from './snapshot/snapshot.js';
export {
  unpickle,
  isPickle,
  PickleFormatError,
  defaultMaxPickleItems,
  type PickleValue,
  type PickleDict,
  type UnpickleOptions,
} from './snapshot/unpickle.js';
export { traceFromEvents } from './from-events.js';
export {
  compileTrace,
  replayTrace,
  maxReplayStreams,
  type CompiledTrace,
  type ReplayOptions,
  type ReplayResult,
  type ReplayLoop,
} from './replay.js';
export { replayStreams, peakByTag } from './replay.js';
export {
  createReplayAllocator,
  capacityCap,
  type StrategySpec,
  type CapacityLimit,
  type ReplayAllocator,
  type ReplayAllocatorOptions,
} from './capacity.js';
export {
  searchMinCapacity,
  findMinCapacity,
  defaultCapacityResolution,
  type MinCapacity,
  type MinCapacitySearch,
  type MinCapacityOptions,
} from './min-capacity.js';
export { profileReplay, type ReplayProfile, type OomSnapshot, type ProfileOptions } from './profile.js';
export { LiveBytesByTag } from './live-bytes-by-tag.js';
export { addressSpaceRoom, engineHeadroomBytes, type AddressSpaceRoom } from './address-space.js';
export { pytorchBaseline, pytorchBaselineLabel, type RecordedBaseline } from './baseline.js';
export { pytorchTwin, pytorchTwinOptions } from './pytorch-twin.js';
export {
  adviseAllocator,
  strategyMemory,
  type Advice,
  type AdvicePick,
  type AdviceCandidate,
  type AdviceBaseline,
  type AdviceContext,
  type SkippedStrategy,
  type StrategyMemory,
} from './advice.js';
export {
  replayStrategy,
  type LabelledStrategySpec,
  type StrategyReplay,
  type StrategyReplayOptions,
} from './strategy-replay.js';
export { recommendStrategy, type RecommendOptions } from './recommend.js';
export {
  diagnoseOom,
  recordedCapacity,
  type DoctorDecision,
  type DoctorOptions,
  type DoctorPeak,
  type DoctorReduction,
  type DoctorStrategy,
  type DoctorVerdict,
  type DoctorVerdictKind,
  type RecordedCapacity,
} from './doctor.js';
export {
  defaultOutsideMemory,
  defaultPytorchModelError,
  defaultPytorchModelErrorFloorBytes,
  defaultStrategyModelError,
  type BandCall,
  type NeedBand,
  type OutsideMemory,
} from './doctor-band.js';
export type { PeakShare, TransientAtPeak } from './peak-anatomy.js';
