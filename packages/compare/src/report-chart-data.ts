/**
 * The data the HTML report's script draws ({@link ReportData}, embedded as JSON): each run's
 * timeline thinned for drawing, its tiers and devices, the epoch times, their spreads and the
 * training losses, with the colours and byte axes of every chart.
 * @module
 */
import { capTimeline, cleanTimeline } from './timeline.js';
import { deviceLabels } from './devices.js';
import { colorOf, HOST_COLOR, tagColor, withAlpha } from './report-colors.js';
import type {
  DeviceLines,
  EpochBand,
  EpochChart,
  LossChart,
  ReportData,
  SpreadChart,
  TierChart,
  TimelineChart,
} from './report-client/report-data.js';
import type { CompareResult, CompareRun, DeviceRun, TimelineSeries } from './types.js';

/** At most this many points per timeline series go into the report (peaks are kept). */
export const MAX_REPORT_TIMELINE_POINTS = 5000;
/** Above this many epochs, epoch times are drawn as lines instead of grouped bars. */
const MAX_EPOCH_BARS = 60;
/** At most this many epochs per run go into the epoch-time chart. */
const MAX_EPOCH_POINTS = 5000;

/** Every `step`-th value so that at most `max` remain (the last one included). */
function thin<T>(values: readonly T[], max: number): { index: number; value: T }[] {
  const step = Math.max(1, Math.ceil(values.length / max));
  const out: { index: number; value: T }[] = [];
  for (let i = 0; i < values.length; i += step) out.push({ index: i, value: values[i]! });
  const lastIndex = values.length - 1;
  if (lastIndex >= 0 && out.at(-1)!.index !== lastIndex) out[out.length - 1] = { index: lastIndex, value: values[lastIndex]! };
  return out;
}

/** At most this many points per loss curve go into the report. */
const MAX_LOSS_POINTS = 4000;

function roundTo(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** Each device's series of a run over several devices, thinned for drawing, in the colours from the run's own on. */
function deviceSeries(devices: readonly DeviceRun[], index: number): DeviceLines[] {
  const names = deviceLabels(devices);
  return devices.map((d, k) => {
    const series = capTimeline(cleanTimeline(d.timeline), MAX_REPORT_TIMELINE_POINTS);
    return {
      name: names[k]!,
      color: colorOf(index + k),
      fill: withAlpha(colorOf(index + k), 0.12),
      t: series.tMs.map((ms) => roundTo(ms / 1000, 6)),
      allocated: series.allocatedBytes,
      reserved: series.reservedBytes,
    };
  });
}

/** The chart of a run over several devices: a pair of lines per device on the run's clock, the run's epochs shaded. */
function devicesTimelineData(run: CompareRun, index: number, devices: readonly DeviceRun[]): TimelineChart {
  const series = deviceSeries(devices, index);
  const phases = phasesData(run);
  let top = 0;
  let end = 1e-3;
  for (const d of series) {
    for (const v of d.allocated) top = Math.max(top, v);
    for (const v of d.reserved) top = Math.max(top, v);
    end = Math.max(end, d.t.at(-1) ?? 0);
  }
  const own = byteAxis(top);
  return {
    canvasId: `timeline-${index}`,
    allocator: run.allocator,
    color: colorOf(index),
    fill: withAlpha(colorOf(index), 0.12),
    t: [],
    xTitle: 'time since the ranks were started',
    allocated: [],
    reserved: [],
    xMax: phases.reduce((a, p) => Math.max(a, p.end), end),
    tags: [],
    ownYMax: own.max,
    ownYStep: own.step,
    phases,
    devices: series,
    tiers: null,
  };
}

/** A run's epochs in seconds on its timeline's clock (the bands of its charts). */
function phasesData(run: CompareRun): EpochBand[] {
  return (run.phases ?? [])
    .filter((p) => Number.isFinite(p.startMs) && Number.isFinite(p.endMs) && p.endMs >= p.startMs)
    .map((p) => ({ name: p.name, start: roundTo(p.startMs / 1000, 6), end: roundTo(p.endMs / 1000, 6) }));
}

function timelineData(result: CompareResult): TimelineChart[] {
  const out: TimelineChart[] = [];
  result.runs.forEach((run, index) => {
    if (run.status !== 'ok') return;
    if (run.devices && run.devices.length > 0) {
      out.push(devicesTimelineData(run, index, run.devices));
      return;
    }
    if (run.timeline === null) return;
    const series = capTimeline(cleanTimeline(run.timeline), MAX_REPORT_TIMELINE_POINTS);
    const phases = phasesData(run);
    const t = series.tMs.map((ms) => roundTo(ms / 1000, 6));
    const xMax = phases.reduce((a, p) => Math.max(a, p.end), Math.max(t.at(-1) ?? 0, 1e-3));
    let top = 0;
    for (const v of series.allocatedBytes) top = Math.max(top, v);
    for (const v of series.reservedBytes) top = Math.max(top, v);
    const own = byteAxis(top);
    out.push({
      tiers: tierData(series, index),
      canvasId: `timeline-${index}`,
      allocator: run.allocator,
      color: colorOf(index),
      fill: withAlpha(colorOf(index), 0.12),
      t,
      xTitle: result.replay ? "time in the trace (the recording's clock)" : 'time since the allocator was created',
      allocated: series.allocatedBytes,
      reserved: series.reservedBytes,
      xMax,
      tags: (series.tags ?? [])
        .map((name, k) => ({ name, color: tagColor(k), bytes: series.byTag?.[k] ?? [] }))
        .filter((tag) => tag.bytes.some((b) => b > 0)),
      ownYMax: own.max,
      ownYStep: own.step,
      phases,
    });
  });
  return out;
}

/** The device and host parts of a timeline with a host tier (host at most the total); null without one. */
function tierData(series: TimelineSeries, index: number): TierChart | null {
  if (!series.hostAllocatedBytes || !series.hostReservedBytes) return null;
  const hostAllocated = series.allocatedBytes.map((total, i) => Math.max(0, Math.min(total, series.hostAllocatedBytes![i]!)));
  const hostReserved = series.reservedBytes.map((total, i) => Math.max(0, Math.min(total, series.hostReservedBytes![i]!)));
  const deviceAllocated = series.allocatedBytes.map((total, i) => total - hostAllocated[i]!);
  const deviceReserved = series.reservedBytes.map((total, i) => total - hostReserved[i]!);
  let top = 0;
  for (const values of [hostAllocated, hostReserved, deviceAllocated, deviceReserved]) for (const v of values) top = Math.max(top, v);
  const own = byteAxis(top);
  return {
    canvasId: `timeline-${index}-tiers`,
    hostColor: HOST_COLOR,
    hostFill: withAlpha(HOST_COLOR, 0.12),
    deviceAllocated,
    hostAllocated,
    deviceReserved,
    hostReserved,
    ownYMax: own.max,
    ownYStep: own.step,
  };
}

function epochChartData(result: CompareResult): EpochChart | null {
  const runs = result.runs.map((run, index) => ({ run, index })).filter(({ run }) => run.epochs.length > 0);
  if (runs.length === 0) return null;
  const count = Math.max(...runs.map(({ run }) => run.epochs.length));
  const positions = thin([...Array(count).keys()], MAX_EPOCH_POINTS).map(({ value }) => value);
  return {
    canvasId: 'epoch-times',
    type: count > MAX_EPOCH_BARS ? 'line' : 'bar',
    // Counted from 1, as the timeline's epoch bands are.
    labels: positions.map((i) => `epoch ${i + 1}`),
    datasets: runs.map(({ run, index }) => ({
      allocator: run.allocator,
      color: colorOf(index),
      epochMs: positions.map((i) => {
        const ms = run.epochs[i]?.epochMs;
        return ms !== undefined && Number.isFinite(ms) ? roundTo(ms, 3) : null;
      }),
    })),
  };
}

/** A byte axis from 0 over `top` bytes in about six round steps of the binary unit that fits (e.g. 50 MiB). */
function byteAxis(top: number): { max: number; step: number } {
  if (!(top > 0)) return { max: 1024, step: 256 };
  let unit = 1;
  while (top / unit >= 1024 && unit < 2 ** 50) unit *= 1024;
  const raw = top / unit / 6;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * magnitude >= raw) ?? 10) * magnitude * unit;
  return { max: Math.ceil((top * 1.02) / step) * step, step };
}

/** Everything the page's script draws for `result`. */
export function chartData(result: CompareResult): ReportData {
  const timelines = timelineData(result);
  let top = 0;
  for (const t of timelines) {
    for (const s of [t, ...(t.devices ?? [])]) {
      for (const v of s.allocated) top = Math.max(top, v);
      for (const v of s.reserved) top = Math.max(top, v);
    }
  }
  const axis = byteAxis(top);
  return {
    yMax: axis.max,
    yStep: axis.step,
    timelines,
    epochChart: epochChartData(result),
    lossChart: lossChartData(result),
    spreadChart: spreadChartData(result),
  };
}

/** Spreads of the measured epoch times (warm-up left out), one box per run and baseline that has two or more. */
function spreadChartData(result: CompareResult): SpreadChart | null {
  const rows = [
    ...result.runs.map((run, index) => ({
      name: run.allocator,
      color: colorOf(index),
      spread: run.status === 'ok' ? run.epochSpread : null,
    })),
    ...(result.baselines ?? []).map((baseline, k) => ({
      name: baseline.name,
      color: colorOf(result.runs.length + k),
      spread: baseline.epochSpread,
    })),
  ].filter(
    (r): r is { name: string; color: string; spread: NonNullable<typeof r.spread> } =>
      r.spread !== null && r.spread !== undefined && r.spread.n >= 2,
  );
  if (rows.length === 0) return null;
  return {
    canvasId: 'epoch-spread',
    labels: rows.map((r) => r.name),
    colors: rows.map((r) => r.color),
    range: rows.map((r) => [roundTo(r.spread.min, 3), roundTo(r.spread.max, 3)]),
    box: rows.map((r) => [roundTo(r.spread.q1, 3), roundTo(r.spread.q3, 3)]),
    median: rows.map((r) => roundTo(r.spread.median, 3)),
  };
}

/** Every run's and every baseline's training loss per step, end to end over the epochs (thinned for drawing). */
function lossChartData(result: CompareResult): LossChart | null {
  const series = [
    // with --repeat a row holds every repeat's epochs: the curve is the first run's (each repeat trains afresh)
    ...result.runs.map((run, index) => ({
      name: run.allocator,
      color: colorOf(index),
      dash: false,
      losses: run.epochs.slice(0, result.workload.epochs).flatMap((e) => e.losses ?? []),
    })),
    ...(result.baselines ?? []).map((baseline, k) => ({
      name: baseline.name,
      color: colorOf(result.runs.length + k),
      dash: true,
      losses: baseline.epochs.flatMap((e) => e.losses),
    })),
  ].filter((s) => s.losses.length > 1);
  if (series.length === 0) return null;
  return {
    canvasId: 'loss-curves',
    datasets: series.map((s) => {
      const kept = thin(s.losses, MAX_LOSS_POINTS);
      return { name: s.name, color: s.color, dash: s.dash, step: kept.map((p) => p.index + 1), loss: kept.map((p) => roundTo(p.value, 6)) };
    }),
  };
}
