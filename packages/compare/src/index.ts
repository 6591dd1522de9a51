/**
 * @gpumem/compare: the same workload under each allocator, one after another in child processes,
 * then one table; memory timelines from tracking events, a self-contained HTML report and a
 * Perfetto (Chrome) trace. Allocator specs (`NAME:key=value`) are parsed here.
 * @packageDocumentation
 */
export {
  compareAllocators,
  runOne,
  bestOf,
  defaultTrackingCapacity,
  defaultTimelinePoints,
  type CompareOptions,
  type CompareTrainOptions,
  type RunRequest,
} from './compare.js';
export { buildTimeline, capTimeline, cleanTimeline } from './timeline.js';
export { parseAllocatorSpec, parseAllocatorList, type AllocatorSpec } from './spec.js';
export type { CompareResult, CompareRun, CompareColumn, TimelineSeries, RunStatus } from './types.js';
export { renderHtmlReport } from './report-html.js';
export { toChromeTrace, type ChromeTrace, type ChromeTraceEvent } from './trace-json.js';
export { builtInStrategyPackages, importStrategies } from './strategies.js';
