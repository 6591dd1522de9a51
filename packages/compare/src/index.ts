/**
 * @gpumem/compare: the same workload under each allocator, one after another in child processes,
 * then one table (for the terminal, and in the HTML report); memory timelines from tracking events
 * (or, over several devices, each device's sampled from its ranks), a self-contained HTML report and
 * a Perfetto (Chrome) trace. Allocator specs (`NAME:key=value`) are parsed here, and the allocators
 * a command runs when none are named are chosen here.
 * @packageDocumentation
 */
export {
  compareAllocators,
  runOne,
  bestOf,
  rankRuns,
  outsideAllocatorNote,
  defaultTrackingCapacity,
  defaultTimelinePoints,
  defaultRepeat,
  type Ranking,
  type CompareOptions,
  type CompareTrainOptions,
  type RunRequest,
} from './compare.js';
export { buildTimeline, capTimeline, cleanTimeline, peakBreakdown, alignHostSamples, type HostSamples } from './timeline.js';
export { hasHostTier, hostTierSummary, splitPeak, anyHostTier, anyTierMoves } from './tiers.js';
export {
  quartilesFrom,
  spreadOf,
  spreadsOverlap,
  tieTolerance,
  warmupEpochsOf,
  minMeasuredEpochs,
  epochsAfterWarmup,
  type Spread,
} from './spread.js';
export { recommendRuns, type CompareRecommendation } from './recommendation.js';
export { mergeRepeats } from './repeat.js';
export { isDistributed, runDistributed, summariseDistributed } from './distributed-run.js';
export { deviceRun, deviceLabels, devicePeaksText, anyDevices } from './devices.js';
export { parseBaseline, readBaseline, baselineThroughput, BaselineFormatError, type BaselineRun } from './baseline.js';
export { parseAllocatorSpec, parseAllocatorList, type AllocatorSpec } from './spec.js';
export { defaultAllocators, type DefaultAllocators, type DefaultAllocatorsOptions } from './default-allocators.js';
export { defaultWorkload, defaultWorkloadHelp, missingDataProblem, type DefaultWorkload } from './default-workload.js';
export { specProblems, type SpecProblem } from './check-specs.js';
export type {
  CompareResult,
  CompareRun,
  CompareColumn,
  ComparePicks,
  TimelineSeries,
  RunStatus,
  HostTierSummary,
  TierSplit,
  DeviceRun,
} from './types.js';
export { renderHtmlReport } from './report-html.js';
export { renderDoctorReport, type DoctorReportInfo } from './doctor-report.js';
export { formatCompareTable } from './compare-table.js';
export { formatTable } from './text-table.js';
export { toChromeTrace, type ChromeTrace, type ChromeTraceEvent } from './trace-json.js';
export {
  builtInStrategyPackages,
  defaultPluginTimeoutSeconds,
  importPlugin,
  importStrategies,
  PluginLoadError,
  pluginTimeoutVariable,
  type PluginLoadErrorCode,
} from './strategies.js';
export {
  replayToCompareResult,
  replayReport,
  minCapacityText,
  type ReplayReportInput,
  type ReplayReportRow,
} from './from-replay.js';
export { replayAllocators, type ReplayRun, type ReplayRunOptions } from './replay-run.js';
export { formatReplayTable, replayNotes, replayProgressLine } from './replay-table.js';
export { replayJson } from './replay-json.js';
export { describeTrace } from './trace-description.js';
export type { ExtraColumn, ExtraCell, ReplayReportInfo } from './types.js';
