/**
 * The Chrome trace of `gpumem compare` (`--trace-json`), in the Trace Event Format's JSON object
 * form, which ui.perfetto.dev and chrome://tracing open: one process per allocator, counter tracks
 * of its allocated and reserved bytes (and of their host part, for a strategy with a host tier),
 * and a slice per epoch; for a run over several devices, one more process per rank with its
 * device's counter tracks and epochs.
 * @module
 */
import { capTimeline, cleanTimeline } from './timeline.js';
import { deviceLabels } from './devices.js';
import type { CompareResult, CompareRun, DeviceRun, TimelineSeries } from './types.js';

/** At most this many points per timeline series go into the trace (peaks are kept). */
const MAX_TRACE_TIMELINE_POINTS = 100_000;

/** The thread that holds each run's epoch slices and its failure marker. */
const EPOCH_TID = 1;

/** One event of the Trace Event Format (the kinds this trace uses). */
export type ChromeTraceEvent =
  /** Metadata: process_name, process_sort_index, process_labels, thread_name. */
  | { name: string; ph: 'M'; pid: number; tid: number; args: Record<string, string | number> }
  /**
   * A counter sample: one track per argument, named `${name} ${arg}` in Perfetto ("allocated
   * bytes"); 'host allocated' and 'host reserved' are the host part, for a strategy with a host tier.
   */
  | {
      name: 'allocated' | 'reserved' | 'host allocated' | 'host reserved';
      ph: 'C';
      pid: number;
      tid: number;
      ts: number;
      args: { bytes: number };
    }
  /** A complete slice, `dur` microseconds long. */
  | { name: string; cat: string; ph: 'X'; pid: number; tid: number; ts: number; dur: number; args: Record<string, unknown> }
  /** An instant event, process-scoped. */
  | { name: string; cat: string; ph: 'i'; s: 'p'; pid: number; tid: number; ts: number; args: Record<string, unknown> };

/** The trace as a JSON object: serialise it with `JSON.stringify`. */
export interface ChromeTrace {
  traceEvents: ChromeTraceEvent[];
  displayTimeUnit: 'ms';
  metadata: {
    generator: 'gpumem compare';
    version: number;
    createdAt: string;
    device: string;
    workload: CompareResult['workload'];
    throughputUnit: CompareResult['throughputUnit'];
    /**
     * Each process id's allocator and how its run ended; a rank's process (a run over several
     * devices) also has its rank and device.
     */
    processes: { pid: number; allocator: string; status: CompareRun['status']; rank?: number; device?: string }[];
  };
}

/** Milliseconds to the trace's microseconds, to the nanosecond. */
function us(ms: number): number {
  return Math.round(ms * 1e6) / 1e3;
}

function processEvents(run: CompareRun, pid: number, order: number): ChromeTraceEvent[] {
  const events: ChromeTraceEvent[] = [
    { name: 'process_name', ph: 'M', pid, tid: 0, args: { name: run.allocator } },
    { name: 'process_sort_index', ph: 'M', pid, tid: 0, args: { sort_index: order } },
    { name: 'thread_name', ph: 'M', pid, tid: EPOCH_TID, args: { name: 'epochs' } },
  ];
  if (run.status !== 'ok') {
    events.push({ name: 'process_labels', ph: 'M', pid, tid: 0, args: { labels: `${run.status}: ${run.error ?? 'no message'}` } });
  }
  return events;
}

function counterEvents(run: CompareRun, pid: number): ChromeTraceEvent[] {
  return run.timeline === null ? [] : seriesCounterEvents(run.timeline, pid);
}

/** The counter tracks of one timeline in process `pid`. */
function seriesCounterEvents(timeline: TimelineSeries, pid: number): ChromeTraceEvent[] {
  const series = capTimeline(cleanTimeline(timeline), MAX_TRACE_TIMELINE_POINTS);
  const allocated: ChromeTraceEvent[] = [];
  const reserved: ChromeTraceEvent[] = [];
  const hostAllocated: ChromeTraceEvent[] = [];
  const hostReserved: ChromeTraceEvent[] = [];
  const host = series.hostAllocatedBytes && series.hostReservedBytes ? [series.hostAllocatedBytes, series.hostReservedBytes] : null;
  series.tMs.forEach((tMs, i) => {
    const ts = us(tMs);
    allocated.push({ name: 'allocated', ph: 'C', pid, tid: 0, ts, args: { bytes: series.allocatedBytes[i]! } });
    reserved.push({ name: 'reserved', ph: 'C', pid, tid: 0, ts, args: { bytes: series.reservedBytes[i]! } });
    if (host) {
      hostAllocated.push({ name: 'host allocated', ph: 'C', pid, tid: 0, ts, args: { bytes: host[0]![i]! } });
      hostReserved.push({ name: 'host reserved', ph: 'C', pid, tid: 0, ts, args: { bytes: host[1]![i]! } });
    }
  });
  return [...allocated, ...reserved, ...hostAllocated, ...hostReserved];
}

function epochEvents(run: CompareRun, pid: number): ChromeTraceEvent[] {
  const phases = (run.phases ?? []).filter((p) => Number.isFinite(p.startMs) && Number.isFinite(p.endMs) && p.endMs >= p.startMs);
  return phases.map((phase, i) => {
    const epoch = phases.length === run.epochs.length ? run.epochs[i] : undefined;
    const args: Record<string, unknown> = epoch
      ? {
          epoch: epoch.epoch,
          epochMs: epoch.epochMs,
          loss: epoch.loss,
          accuracy: epoch.accuracy,
          peakAllocatedBytes: epoch.peakAllocatedBytes,
          peakReservedBytes: epoch.peakReservedBytes,
          upstreamAllocCalls: epoch.upstreamAllocCalls,
          upstreamFreeCalls: epoch.upstreamFreeCalls,
          ...(epoch.stats?.peakHostAllocatedBytes !== undefined ? { peakHostAllocatedBytes: epoch.stats.peakHostAllocatedBytes } : {}),
          ...(epoch.stats?.peakHostReservedBytes !== undefined ? { peakHostReservedBytes: epoch.stats.peakHostReservedBytes } : {}),
        }
      : {};
    return phaseSpan(phase, pid, args);
  });
}

/** A phase (an epoch) as a complete event on the process's epochs thread. */
function phaseSpan(phase: { name: string; startMs: number; endMs: number }, pid: number, args: Record<string, unknown>): ChromeTraceEvent {
  return {
    name: phase.name,
    cat: 'epoch',
    ph: 'X',
    pid,
    tid: EPOCH_TID,
    ts: us(phase.startMs),
    dur: us(phase.endMs - phase.startMs),
    args,
  };
}

/** A marker where a failed run stopped: at its last timeline point or epoch end, else at 0. */
function failureEvent(run: CompareRun, pid: number): ChromeTraceEvent[] {
  if (run.status === 'ok') return [];
  const times = [
    ...(run.timeline ? cleanTimeline(run.timeline).tMs.slice(-1) : []),
    ...(run.phases ?? []).map((p) => p.endMs).filter(Number.isFinite),
  ];
  const ts = us(times.reduce((a, b) => Math.max(a, b), 0));
  const name = run.status === 'oom' ? 'out of memory' : 'error';
  return [
    { name, cat: 'failure', ph: 'i', s: 'p', pid, tid: EPOCH_TID, ts, args: { message: run.error ?? 'no message', stats: run.stats } },
  ];
}

/** A rank of a run over several devices, as a process of the trace. */
interface RankProcess {
  pid: number;
  run: CompareRun;
  device: DeviceRun;
  /** The device's name in its run (see deviceLabels). */
  label: string;
}

/**
 * The processes of the ranks of every run over several devices, numbered after the runs' own:
 * process `runs + 1` is the first run's rank 0, and so on in run and rank order.
 */
function rankProcesses(runs: readonly CompareRun[]): RankProcess[] {
  let pid = runs.length;
  return runs.flatMap((run) => {
    const devices = run.devices ?? [];
    const labels = deviceLabels(devices);
    return devices.map((device, k) => ({ pid: ++pid, run, device, label: labels[k]! }));
  });
}

/**
 * One rank's process: named by its run's allocator and its device, sorted after the runs, with its
 * device's counter tracks "allocated bytes" and "reserved bytes" (sampled after every step or
 * epoch) and an "epochs" thread of the rank's own epochs.
 */
function rankEvents(p: RankProcess, order: number): ChromeTraceEvent[] {
  const { pid, run, device } = p;
  return [
    { name: 'process_name', ph: 'M', pid, tid: 0, args: { name: `${run.allocator}: ${p.label}` } },
    { name: 'process_sort_index', ph: 'M', pid, tid: 0, args: { sort_index: order } },
    { name: 'thread_name', ph: 'M', pid, tid: EPOCH_TID, args: { name: 'epochs' } },
    ...seriesCounterEvents(device.timeline, pid),
    ...device.phases
      .filter((phase) => Number.isFinite(phase.startMs) && Number.isFinite(phase.endMs) && phase.endMs >= phase.startMs)
      .map((phase) => phaseSpan(phase, pid, { rank: device.rank, device: device.device })),
  ];
}

/**
 * The comparison as a Chrome trace: process `i + 1` is run `i` (named by its allocator, sorted in
 * run order, labelled with the failure when it failed), with counter tracks "allocated bytes" and
 * "reserved bytes" from its timeline (and "host allocated bytes" and "host reserved bytes" where the
 * strategy has a host tier), an "epochs" thread of one slice per epoch, and a marker where
 * a failed run stopped. Timestamps are microseconds on each run's own clock (since its allocator was
 * created), ascending per track. A run over several devices has no timeline of its own: each of
 * its ranks is one more process after the runs' (see rankProcesses), with its device's counter
 * tracks and epochs on the run's clock (since the ranks were started).
 */
export function toChromeTrace(result: CompareResult): ChromeTrace {
  const traceEvents: ChromeTraceEvent[] = [];
  const push = (part: readonly ChromeTraceEvent[]) => {
    // A loop, not push(...events): a long timeline would pass too many arguments.
    for (const event of part) traceEvents.push(event);
  };
  result.runs.forEach((run, i) => {
    const pid = i + 1;
    for (const part of [processEvents(run, pid, i), counterEvents(run, pid), epochEvents(run, pid), failureEvent(run, pid)]) push(part);
  });
  const ranks = rankProcesses(result.runs);
  ranks.forEach((p, k) => {
    push(rankEvents(p, result.runs.length + k));
  });
  return {
    traceEvents,
    displayTimeUnit: 'ms',
    metadata: {
      generator: 'gpumem compare',
      version: result.version,
      createdAt: result.createdAt,
      device: result.device,
      workload: result.workload,
      throughputUnit: result.throughputUnit,
      processes: [
        ...result.runs.map((run, i) => ({ pid: i + 1, allocator: run.allocator, status: run.status })),
        ...ranks.map((p) => ({
          pid: p.pid,
          allocator: p.run.allocator,
          status: p.run.status,
          rank: p.device.rank,
          device: p.device.device,
        })),
      ],
    },
  };
}
