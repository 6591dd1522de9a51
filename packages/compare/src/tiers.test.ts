/**
 * Strategies with a host tier beside the device: their peaks split in the result (and its JSON), the
 * host part of their timelines, the report's tier chart and tables, and the trace's host counters;
 * strategies without one unchanged.
 */
import { describe, expect, it } from 'vitest';
import type { AllocatorStats, TrackingEvent } from '@gpumem/allocator-core';
import { formatBytes } from '@gpumem/allocator-core';
import './fixtures/tiered-plugin.mjs';
import { runOne, type RunRequest } from './compare.js';
import { sampleCompareResult } from './fixture.js';
import { mergeRepeats } from './repeat.js';
import { renderHtmlReport } from './report-html.js';
import { alignHostSamples, buildTimeline, capTimeline, cleanTimeline } from './timeline.js';
import { hasHostTier, hostTierSummary, splitPeak } from './tiers.js';
import { toChromeTrace, type ChromeTraceEvent } from './trace-json.js';
import type { CompareResult, CompareRun, TimelineSeries } from './types.js';

const MiB = 2 ** 20;

function stats(partial: Partial<AllocatorStats>): AllocatorStats {
  return {
    allocatedBytes: 0,
    peakAllocatedBytes: 0,
    reservedBytes: 0,
    peakReservedBytes: 0,
    allocCount: 0,
    freeCount: 0,
    upstreamAllocCount: 0,
    upstreamFreeCount: 0,
    oomCount: 0,
    ...partial,
  };
}

interface EmbeddedTimeline {
  allocator: string;
  canvasId: string;
  allocated: number[];
  reserved: number[];
  tiers: {
    canvasId: string;
    deviceAllocated: number[];
    hostAllocated: number[];
    deviceReserved: number[];
    hostReserved: number[];
    ownYMax: number;
  } | null;
}

function embeddedTimelines(html: string): EmbeddedTimeline[] {
  const match = /<script type="application\/json" id="gpumem-data">([\s\S]*?)<\/script>/.exec(html);
  expect(match, 'the embedded chart data').not.toBeNull();
  return JSON.parse(match![1]!).timelines;
}

function runRow(html: string, allocator: string): string {
  const row = new RegExp(`<tr class="run run-[^"]*" data-allocator="${allocator}">[\\s\\S]*?</tr>`).exec(html);
  expect(row, `the row of ${allocator}`).not.toBeNull();
  return row![0];
}

function figure(html: string, index: number): string {
  const fig = new RegExp(`<figure class="timeline[^"]*" data-run="${index}">[\\s\\S]*?</figure>`).exec(html);
  expect(fig, `the figure of run ${index}`).not.toBeNull();
  return fig![0];
}

describe('the peaks split between the tiers', () => {
  it('splits a peak into the host peak and the rest, the host part at most the peak', () => {
    expect(splitPeak(100, 30)).toEqual({ deviceBytes: 70, hostBytes: 30 });
    expect(splitPeak(100, 130)).toEqual({ deviceBytes: 0, hostBytes: 100 });
    expect(splitPeak(100, 0)).toEqual({ deviceBytes: 100, hostBytes: 0 });
  });

  it('takes the highest host peak of the epochs and the bytes moved at the end; nothing without a host tier', () => {
    const epochs = [
      stats({
        peakAllocatedBytes: 80,
        peakReservedBytes: 90,
        hostAllocatedBytes: 5,
        peakHostAllocatedBytes: 20,
        hostReservedBytes: 8,
        peakHostReservedBytes: 24,
      }),
      stats({
        peakAllocatedBytes: 100,
        peakReservedBytes: 120,
        hostAllocatedBytes: 9,
        peakHostAllocatedBytes: 35,
        hostReservedBytes: 10,
        peakHostReservedBytes: 40,
      }),
    ];
    const end = stats({
      hostAllocatedBytes: 0,
      peakHostAllocatedBytes: 9,
      hostReservedBytes: 10,
      peakHostReservedBytes: 10,
      bytesMovedToHost: 700,
      bytesMovedToDevice: 300,
    });
    expect(hostTierSummary(100, 120, epochs, end)).toEqual({
      peakAllocated: { deviceBytes: 65, hostBytes: 35 },
      peakReserved: { deviceBytes: 80, hostBytes: 40 },
      bytesMovedToHost: 700,
      bytesMovedToDevice: 300,
    });
    expect(hostTierSummary(100, 120, [stats({ peakAllocatedBytes: 100 })], stats({}))).toBeUndefined();
    expect(hasHostTier(stats({}))).toBe(false);
    expect(hasHostTier(null)).toBe(false);
    expect(hasHostTier(stats({ hostAllocatedBytes: 0 }))).toBe(true);
  });

  it('pools repeats: the highest host peak of any repeat splits the pooled peak', () => {
    const tiered = sampleCompareResult({ tiered: true }).runs[4]!;
    const second: CompareRun = {
      ...tiered,
      peakAllocatedBytes: tiered.peakAllocatedBytes! + 10 * MiB,
      tiers: {
        ...tiered.tiers!,
        peakAllocated: splitPeak(tiered.peakAllocatedBytes! + 10 * MiB, tiered.tiers!.peakAllocated.hostBytes + 4 * MiB),
      },
    };
    const merged = mergeRepeats([tiered, second]);
    expect(merged.peakAllocatedBytes).toBe(tiered.peakAllocatedBytes! + 10 * MiB);
    expect(merged.tiers!.peakAllocated.hostBytes).toBe(tiered.tiers!.peakAllocated.hostBytes + 4 * MiB);
    expect(merged.tiers!.peakAllocated.deviceBytes + merged.tiers!.peakAllocated.hostBytes).toBe(merged.peakAllocatedBytes);
    expect(merged.tiers!.bytesMovedToHost).toBe(tiered.tiers!.bytesMovedToHost);
    const plain = sampleCompareResult().runs[1]!;
    expect(mergeRepeats([plain, { ...plain }])).not.toHaveProperty('tiers');
  });
});

describe('the JSON result of a comparison with a tiered run', () => {
  const result = JSON.parse(JSON.stringify(sampleCompareResult({ tiered: true }))) as CompareResult;

  it('carries the split per run, explicit, and only for the run with a host tier', () => {
    expect(result.runs.map((r) => r.allocator)).toEqual(['cuda', 'pool', 'async', 'arena', 'tiered']);
    for (const run of result.runs.slice(0, 4)) {
      expect(run).not.toHaveProperty('tiers');
      expect(run.timeline).not.toHaveProperty('hostAllocatedBytes');
      expect(run.stats).not.toHaveProperty('hostAllocatedBytes');
    }
    const tiered = result.runs[4]!;
    expect(tiered.status).toBe('ok');
    const { tiers } = tiered;
    expect(tiers).toBeDefined();
    // the fixture's device tier holds 128 MiB: the rest of the peak is on the host
    expect(tiers!.peakAllocated.deviceBytes).toBe(128 * MiB);
    expect(tiers!.peakAllocated.deviceBytes + tiers!.peakAllocated.hostBytes).toBe(tiered.peakAllocatedBytes);
    expect(tiers!.peakReserved.deviceBytes + tiers!.peakReserved.hostBytes).toBe(tiered.peakReservedBytes);
    expect(tiers!.peakAllocated.hostBytes).toBe(Math.max(...tiered.timeline!.hostAllocatedBytes!));
    expect(tiers!.bytesMovedToHost).toBeGreaterThan(0);
    expect(tiers!.bytesMovedToDevice).toBeGreaterThan(0);
    expect(tiers!.bytesMovedToHost).toBe(tiered.stats!.bytesMovedToHost);
  });

  it("carries each epoch's host figures in its stats", () => {
    const tiered = result.runs[4]!;
    expect(tiered.epochs).toHaveLength(result.workload.epochs);
    for (const epoch of tiered.epochs) {
      expect(epoch.stats.peakHostAllocatedBytes).toBeGreaterThan(0);
      expect(epoch.stats.peakHostAllocatedBytes).toBeLessThanOrEqual(epoch.peakAllocatedBytes);
      expect(epoch.stats.peakHostReservedBytes).toBeGreaterThanOrEqual(epoch.stats.peakHostAllocatedBytes!);
      expect(typeof epoch.stats.bytesMovedToHost).toBe('number');
    }
    // the split of the run's peak uses the highest epoch's host peak
    expect(tiered.tiers!.peakAllocated.hostBytes).toBe(Math.max(...tiered.epochs.map((e) => e.stats.peakHostAllocatedBytes!)));
  });
});

describe('timelines with a host tier', () => {
  const event = (timeNs: number, action: TrackingEvent['action'], bytes: number, reservedBytes: number): TrackingEvent => ({
    timeNs,
    action,
    bytes,
    reservedBytes,
    ptr: timeNs,
    stream: 0,
    tag: 0,
  });

  it('reads step samples at each point: the latest at or before it, the first before any', () => {
    expect(alignHostSamples([0, 1, 2, 2.5, 3, 9], [1, 2.5, 4], [10, 20, 30])).toEqual([10, 10, 10, 20, 20, 30]);
    expect(alignHostSamples([1, 2], [], [])).toEqual([0, 0]);
  });

  it('records the host part beside the totals when given samples, and nothing more without', () => {
    const events = [event(1e6, 'alloc', 100, 512), event(2e6, 'alloc', 300, 1024), event(3e6, 'free', 100, 1024)];
    const host = { tMs: [0, 2.5], allocatedBytes: [0, 300], reservedBytes: [0, 512] };
    const t = buildTimeline(events, 300, 100, 0, undefined, host);
    expect(t.allocatedBytes).toEqual([100, 400, 300]);
    expect(t.hostAllocatedBytes).toEqual([0, 0, 300]);
    expect(t.hostReservedBytes).toEqual([0, 0, 512]);
    // a sample older than a point is cut to the point's total
    const late = buildTimeline([...events, event(4e6, 'free', 300, 256)], 0, 100, 0, undefined, host);
    expect(late.hostAllocatedBytes).toEqual([0, 0, 300, 0]);
    expect(late.hostReservedBytes).toEqual([0, 0, 512, 256]);
    expect(buildTimeline(events, 300, 100)).not.toHaveProperty('hostAllocatedBytes');
  });

  it('keeps the host arrays through cleaning and the host peaks through thinning', () => {
    const n = 60_000;
    const series: TimelineSeries = {
      tMs: Array.from({ length: n }, (_, i) => i),
      allocatedBytes: Array.from({ length: n }, () => 5_000_000),
      reservedBytes: Array.from({ length: n }, () => 6_000_000),
      hostAllocatedBytes: Array.from({ length: n }, (_, i) => (i === 31_337 ? 4_000_000 : 1000)),
      hostReservedBytes: Array.from({ length: n }, (_, i) => (i === 7_777 ? 4_500_000 : 2000)),
    };
    const capped = capTimeline(series, 1000);
    expect(capped.tMs.length).toBeLessThanOrEqual(1000);
    expect(capped.hostAllocatedBytes).toHaveLength(capped.tMs.length);
    expect(capped.hostAllocatedBytes).toContain(4_000_000);
    expect(capped.hostReservedBytes).toContain(4_500_000);
    const clean = cleanTimeline({
      tMs: [2, 1, 3],
      allocatedBytes: [20, 10, 30],
      reservedBytes: [21, 11, 31],
      hostAllocatedBytes: [2, 1, Number.NaN],
      hostReservedBytes: [3, 2, 4],
    });
    expect(clean).toEqual({
      tMs: [1, 2],
      allocatedBytes: [10, 20],
      reservedBytes: [11, 21],
      hostAllocatedBytes: [1, 2],
      hostReservedBytes: [2, 3],
    });
  });
});

describe('runOne with a host tier (CPU)', () => {
  const request = (name: string, options: Record<string, unknown> = {}, record = true): RunRequest => ({
    spec: { label: name, name, options },
    train: { model: 'mlp', epochs: 2, trainSubset: 256, testSubset: 128, hidden: [32] },
    record,
    trackingCapacity: 1 << 16,
    timelinePoints: 1000,
    plugins: [],
  });

  it('samples the host part into the timeline and splits the peaks', () => {
    const run = runOne(request('tiered-test'));
    expect(run.status, run.error).toBe('ok');
    const t = run.timeline!;
    expect(t.hostAllocatedBytes).toHaveLength(t.tMs.length);
    expect(t.hostReservedBytes).toHaveLength(t.tMs.length);
    // the weights and the 784-wide batches are over 64 KiB: a host part is seen during training
    expect(Math.max(...t.hostAllocatedBytes!)).toBeGreaterThan(0);
    // the host part never exceeds the total, even where the last sample is older than the point
    t.hostAllocatedBytes!.forEach((b, i) => {
      expect(b).toBeLessThanOrEqual(t.allocatedBytes[i]!);
    });
    t.hostReservedBytes!.forEach((b, i) => {
      expect(b).toBeLessThanOrEqual(t.reservedBytes[i]!);
    });
    expect(t.hostAllocatedBytes!.at(-1)).toBe(0);
    const tiers = run.tiers!;
    expect(tiers.peakAllocated.hostBytes).toBeGreaterThan(0);
    expect(tiers.peakAllocated.deviceBytes + tiers.peakAllocated.hostBytes).toBe(run.peakAllocatedBytes);
    expect(tiers.peakAllocated.hostBytes).toBe(Math.max(...run.epochs.map((e) => e.stats.peakHostAllocatedBytes!)));
    expect(tiers.bytesMovedToHost).toBe(0);
    for (const e of run.epochs) expect(e.stats.hostAllocatedBytes).toBeTypeOf('number');
  });

  it('splits the peaks without a timeline too, and leaves runs without a host tier as they were', () => {
    const unrecorded = runOne(request('tiered-test', {}, false));
    expect(unrecorded.status).toBe('ok');
    expect(unrecorded.timeline).toBeNull();
    expect(unrecorded.tiers!.peakAllocated.hostBytes).toBeGreaterThan(0);
    const host = runOne(request('host'));
    expect(host.status).toBe('ok');
    expect(host).not.toHaveProperty('tiers');
    expect(host.timeline).not.toHaveProperty('hostAllocatedBytes');
    expect(host.timeline).not.toHaveProperty('hostReservedBytes');
  });

  it('splits the peaks of a run that failed, from the stats at the failure', () => {
    const full = runOne(request('tiered-test', {}, false));
    // a capacity under the run's peak: the first epoch runs out of memory after the weights are in
    const run = runOne(request('tiered-test', { capacityBytes: Math.floor(full.peakAllocatedBytes! * 0.9) }));
    expect(run.status).toBe('oom');
    expect(run.error).toMatch(/tiered-test: could not allocate/);
    expect(run.stats!.hostAllocatedBytes).toBeTypeOf('number');
    expect(run.tiers!.peakAllocated.hostBytes).toBeGreaterThan(0);
    expect(run.tiers!.peakAllocated.hostBytes).toBe(run.stats!.peakHostAllocatedBytes);
    expect(run.tiers!.peakAllocated.deviceBytes + run.tiers!.peakAllocated.hostBytes).toBe(run.peakAllocatedBytes);
  });
});

describe('the report of a comparison with a tiered run', () => {
  const result = sampleCompareResult({ tiered: true });
  const html = renderHtmlReport(result);
  const plainHtml = renderHtmlReport(sampleCompareResult());

  it('draws a device and host chart for the tiered run only, from its host timeline', () => {
    const timelines = embeddedTimelines(html);
    expect(timelines.map((t) => [t.allocator, t.tiers !== null])).toEqual([
      ['cuda', false],
      ['pool', false],
      ['async', false],
      ['tiered', true],
    ]);
    const tl = timelines[3]!;
    const run = result.runs[4]!;
    expect(tl.tiers!.canvasId).toBe('timeline-4-tiers');
    expect(html).toContain('<canvas id="timeline-4-tiers"');
    expect(tl.tiers!.hostAllocated).toEqual(run.timeline!.hostAllocatedBytes);
    expect(tl.tiers!.hostReserved).toEqual(run.timeline!.hostReservedBytes);
    tl.allocated.forEach((total, i) => {
      expect(tl.tiers!.deviceAllocated[i]! + tl.tiers!.hostAllocated[i]!).toBe(total);
      expect(tl.tiers!.deviceReserved[i]! + tl.tiers!.hostReserved[i]!).toBe(tl.reserved[i]);
    });
    expect(Math.max(...tl.tiers!.deviceAllocated)).toBe(128 * MiB);
    // the legend's series are named in the page's script, for every tier chart
    for (const label of ['device reserved', 'device allocated', 'host reserved', 'host allocated'])
      expect(html).toContain(`bytesLine('${label}'`);
    expect(figure(html, 4)).toContain('class="timeline tiered"');
    for (const i of [0, 1, 2]) {
      expect(figure(html, i)).not.toContain('-tiers"');
      expect(figure(html, i)).not.toContain('table class="stats tiers"');
    }
    expect(html).toMatch(/second chart splitting its bytes into device/);
  });

  it('shows the split peaks in the tiered row, the bytes moved in a column of their own, and the host figures in its stats table', () => {
    const tiers = result.runs[4]!.tiers!;
    const row = runRow(html, 'tiered');
    expect(row).toContain(`${formatBytes(tiers.peakAllocated.deviceBytes)} device + ${formatBytes(tiers.peakAllocated.hostBytes)} host`);
    expect(row).toContain(`${formatBytes(tiers.peakReserved.deviceBytes)} device + ${formatBytes(tiers.peakReserved.hostBytes)} host`);
    expect(row).toContain(`${formatBytes(tiers.bytesMovedToHost)} / ${formatBytes(tiers.bytesMovedToDevice)}`);
    expect(html).toContain('Moved between tiers');
    for (const allocator of ['cuda', 'pool', 'async', 'arena']) expect(runRow(html, allocator)).not.toContain('class="tiers"');
    const table = /<table class="stats tiers"[^>]*>[\s\S]*?<\/table>/.exec(figure(html, 4));
    expect(table).not.toBeNull();
    expect(table![0]).toContain(
      `<th scope="row">peak allocated</th><td class="num">${formatBytes(tiers.peakAllocated.deviceBytes)}</td><td class="num">${formatBytes(tiers.peakAllocated.hostBytes)}</td>`,
    );
    expect(table![0]).toContain(formatBytes(tiers.bytesMovedToHost));
    expect(table![0]).toContain(formatBytes(tiers.bytesMovedToDevice));
  });

  it('lists the host figures of a tiered run that failed in its statistics at the failure', () => {
    const failed = sampleCompareResult({ tiered: true });
    const run = failed.runs[4]!;
    Object.assign(run, { status: 'oom', error: 'tiered: out of memory', timeline: null });
    const page = renderHtmlReport(failed);
    const fig = figure(page, 4);
    expect(fig).toContain('Statistics at the failure');
    expect(fig).toContain(
      `<th scope="row">peak host allocated</th><td class="num">${formatBytes(run.stats!.peakHostAllocatedBytes!)}</td>`,
    );
    expect(fig).toContain(`<th scope="row">moved to host / to device</th>`);
  });

  it('is as it was for a comparison with no host tier', () => {
    expect(plainHtml).not.toContain('Moved between tiers');
    expect(plainHtml).not.toContain('class="tiers"');
    expect(plainHtml).not.toContain('-tiers"');
    expect(plainHtml).not.toContain('stats tiers');
    expect(plainHtml).not.toMatch(/second chart splitting/);
    expect(embeddedTimelines(plainHtml).every((t) => t.tiers === null)).toBe(true);
  });
});

describe('the trace of a comparison with a tiered run', () => {
  const result = sampleCompareResult({ tiered: true });
  const events = toChromeTrace(result).traceEvents;
  const counters = events.filter((e): e is Extract<ChromeTraceEvent, { ph: 'C' }> => e.ph === 'C');

  it('has host allocated and host reserved counter tracks for the tiered run only', () => {
    const run = result.runs[4]!;
    const track = (name: string) => counters.filter((e) => e.pid === 5 && e.name === name);
    expect(track('host allocated').map((e) => e.args.bytes)).toEqual(run.timeline!.hostAllocatedBytes);
    expect(track('host reserved').map((e) => e.args.bytes)).toEqual(run.timeline!.hostReservedBytes);
    expect(track('host allocated').map((e) => e.ts)).toEqual(track('allocated').map((e) => e.ts));
    for (const pid of [1, 2, 3, 4]) {
      expect(new Set(counters.filter((e) => e.pid === pid).map((e) => e.name))).toEqual(new Set(['allocated', 'reserved']));
    }
  });

  it("puts each epoch's host peaks on its slice", () => {
    const slices = events.filter((e): e is Extract<ChromeTraceEvent, { ph: 'X' }> => e.ph === 'X');
    const tiered = slices.filter((e) => e.pid === 5);
    expect(tiered).toHaveLength(result.workload.epochs);
    tiered.forEach((slice, k) => {
      expect(slice.args.peakHostAllocatedBytes).toBe(result.runs[4]!.epochs[k]!.stats.peakHostAllocatedBytes);
      expect(slice.args.peakHostReservedBytes).toBe(result.runs[4]!.epochs[k]!.stats.peakHostReservedBytes);
    });
    for (const slice of slices.filter((e) => e.pid !== 5)) expect(slice.args).not.toHaveProperty('peakHostAllocatedBytes');
  });
});
