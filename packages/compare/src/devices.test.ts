/**
 * Runs over several devices in a comparison: the row made from trainDistributed()'s result (its
 * devices, their timelines and epochs on one clock), repeats pooled per device, the error rows of
 * runs that cannot start, and what the HTML report and the Chrome trace make of them. Synthetic
 * results: no rank process is started here.
 */
import { describe, expect, it } from 'vitest';
import { formatBytes } from '@gpumem/allocator-core';
import { compareAllocators } from './compare.js';
import { deviceLabels, devicePeaksText, rankClockOffset } from './devices.js';
import { isDistributed, runDistributed, summariseDistributed } from './distributed-run.js';
import { sampleDevicesCompareResult, sampleDistributedTrainResult, sampleRankClockOffset } from './fixture-devices.js';
import { mergeRepeats } from './repeat.js';
import { renderHtmlReport } from './report-html.js';
import { toChromeTrace, type ChromeTraceEvent } from './trace-json.js';

const MiB = 2 ** 20;
const pool = { label: 'pool', name: 'pool', options: {} };

describe('a run over several devices', () => {
  it('is asked for by a number of devices above 1 or a list of ordinals', () => {
    expect(isDistributed({})).toBe(false);
    expect(isDistributed({ devices: 1 })).toBe(false);
    expect(isDistributed({ devices: 2 })).toBe(true);
    expect(isDistributed({ devices: [0, 0] })).toBe(true);
  });

  it("becomes a row with the combined figures and each device's peaks, timeline and epochs", () => {
    const result = sampleDistributedTrainResult();
    const run = summariseDistributed(pool, result, 2500, 4000);
    expect(run).toMatchObject({ allocator: 'pool', status: 'ok', timeline: null, eventsRecorded: 0, wallMs: 2500 });
    expect(run.epochs).toHaveLength(4);
    // the slowest rank's epochs (220 ms), the first one left out as warm-up
    expect(run.warmupEpochs).toBe(1);
    expect(run.medianEpochMs).toBe(220);
    expect(run.throughput).toBeCloseTo(20_000 / 0.22, 6);
    // the largest of any one device: rank 1 holds 110 MiB at its samples, 118 MiB at its peaks
    expect(run.peakAllocatedBytes).toBe(118 * MiB);
    expect(run.peakReservedBytes).toBe(128 * MiB);
    expect(run.upstreamAllocCalls).toBe(12);
    expect(run.upstreamFreeCalls).toBe(11);
    expect(run.devices!.map((d) => [d.rank, d.device, d.peakAllocatedBytes, d.peakReservedBytes])).toEqual([
      [0, 'cuda:0', 108 * MiB, 128 * MiB],
      [1, 'cuda:1', 118 * MiB, 128 * MiB],
    ]);
    for (const [k, d] of run.devices!.entries()) {
      const samples = result.ranks![k]!.samples;
      expect(d.timeline).toEqual({ tMs: samples.tMs, allocatedBytes: samples.allocatedBytes, reservedBytes: samples.reservedBytes });
      // each rank's epochs moved from its own clock onto the samples' (the rank's process started later)
      const epochMs = 200 + 20 * k;
      expect(d.phases).toHaveLength(4);
      d.phases.forEach((p, e) => {
        expect(p.name).toBe(`epoch ${e + 1}`);
        expect(p.startMs).toBeCloseTo(sampleRankClockOffset(k) + 300 + e * epochMs, 9);
        expect(p.endMs - p.startMs).toBeCloseTo(epochMs, 9);
      });
      expect(d.remoteRows).toEqual({ forward: 900 + k, backward: 880 + k, remote: 1000 });
    }
    // the run's epochs: from the first rank's start to the last rank's end
    run.phases.forEach((p, e) => {
      expect(p.startMs).toBeCloseTo(Math.min(...run.devices!.map((d) => d.phases[e]!.startMs)), 9);
      expect(p.endMs).toBeCloseTo(Math.max(...run.devices!.map((d) => d.phases[e]!.endMs)), 9);
    });
  });

  it("thins each device's timeline to the timeline's points, keeping its peak", () => {
    const result = sampleDistributedTrainResult({ epochs: 200 });
    const spike = result.ranks![1]!.samples;
    spike.allocatedBytes[137] = 300 * MiB;
    const run = summariseDistributed(pool, result, 1, 24);
    for (const d of run.devices!) expect(d.timeline.tMs.length).toBeLessThanOrEqual(24);
    expect(Math.max(...run.devices![1]!.timeline.allocatedBytes)).toBe(300 * MiB);
  });

  it("finds how far a rank's clock lags the samples' from its last sample, never below 0", () => {
    const epochs = [{ startMs: 100, epochMs: 50 }];
    expect(rankClockOffset({ epochs: epochs as never, samples: { tMs: [190], allocatedBytes: [0], reservedBytes: [0] } })).toBe(40);
    // a sample before the epoch ended (an mlp's last step, before validation): no shift
    expect(rankClockOffset({ epochs: epochs as never, samples: { tMs: [140], allocatedBytes: [0], reservedBytes: [0] } })).toBe(0);
    expect(rankClockOffset({ epochs: epochs as never, samples: { tMs: [], allocatedBytes: [], reservedBytes: [] } })).toBe(0);
  });

  it("pools repeats per device: the highest peak of each rank, the first repeat's timeline", () => {
    const first = summariseDistributed(pool, sampleDistributedTrainResult(), 1000, 4000);
    const second = summariseDistributed(pool, sampleDistributedTrainResult(), 1000, 4000);
    second.devices![0]!.peakAllocatedBytes = 150 * MiB;
    second.devices![1]!.timeline = { tMs: [1], allocatedBytes: [1], reservedBytes: [1] };
    const merged = mergeRepeats([first, second]);
    expect(merged.repeats).toBe(2);
    expect(merged.devices!.map((d) => d.peakAllocatedBytes)).toEqual([150 * MiB, 118 * MiB]);
    expect(merged.devices![1]!.timeline).toEqual(first.devices![1]!.timeline);
    expect(merged.epochs).toHaveLength(8);
  });

  it('names the devices by device, or by rank where ranks share one, and lists their peaks', () => {
    expect(
      deviceLabels([
        { rank: 0, device: 'cuda:0' },
        { rank: 1, device: 'cuda:1' },
      ]),
    ).toEqual(['cuda:0', 'cuda:1']);
    expect(
      deviceLabels([
        { rank: 0, device: 'host' },
        { rank: 1, device: 'host' },
      ]),
    ).toEqual(['rank 0 (host)', 'rank 1 (host)']);
    const run = summariseDistributed(pool, sampleDistributedTrainResult(), 1, 4000);
    expect(devicePeaksText(run.devices!)).toBe(
      `cuda:0 ${formatBytes(108 * MiB)} / ${formatBytes(128 * MiB)} \u00b7 cuda:1 ${formatBytes(118 * MiB)} / ${formatBytes(128 * MiB)}`,
    );
  });
});

describe('runs over several devices that cannot start', () => {
  const request = (name: string, devices: number | number[]) => ({
    spec: { label: name, name, options: {} },
    train: { model: 'gcn' as const, dataset: 'sbm' as const, epochs: 1, devices },
    record: true,
    trackingCapacity: 1024,
    timelinePoints: 100,
    plugins: [],
  });

  it('become error rows: a strategy that is not registered, devices the strategy cannot use', async () => {
    const unknown = await runDistributed(request('nope', 2));
    expect(unknown).toMatchObject({ allocator: 'nope', status: 'error', epochs: [], timeline: null });
    expect(unknown.error).toMatch(/nope/);
    // ranks of a strategy over host memory run on the host: a list of CUDA ordinals is refused
    const listed = await runDistributed(request('host', [0, 1]));
    expect(listed.status).toBe('error');
    expect(listed.error).toMatch(/Expected a number of ranks for devices with 'host'/);
  });

  it('go through compareAllocators as error rows, once per allocator with every repeat pooled', async () => {
    const result = await compareAllocators({
      train: { model: 'gcn', dataset: 'sbm', epochs: 1, devices: [0, 1] },
      allocators: [{ label: 'host', name: 'host', options: {} }],
      repeat: 2,
      device: 'host',
      title: 'gcn over two devices',
    });
    expect(result.runs).toHaveLength(1);
    expect(result.runs[0]).toMatchObject({ allocator: 'host', status: 'error', repeats: 2 });
  });
});

describe('the HTML report of runs over several devices', () => {
  const result = sampleDevicesCompareResult();
  const html = renderHtmlReport(result);
  const data = JSON.parse(/<script type="application\/json" id="gpumem-data">([\s\S]*?)<\/script>/.exec(html)![1]!) as {
    timelines: {
      allocator: string;
      canvasId: string;
      xTitle: string;
      t: number[];
      phases: { name: string; start: number; end: number }[];
      devices?: { name: string; color: string; t: number[]; allocated: number[]; reserved: number[] }[];
    }[];
  };

  it('draws one chart per such run with a series per device, beside the recorded timelines', () => {
    expect(data.timelines.map((t) => [t.allocator, t.devices?.length ?? 0])).toEqual([
      ['pool', 2],
      ['async', 0],
    ]);
    const pool = data.timelines[0]!;
    const run = result.runs[0]!;
    expect(pool.canvasId).toBe('timeline-0');
    expect(pool.xTitle).toBe('time since the ranks were started');
    expect(pool.t).toEqual([]);
    pool.devices!.forEach((d, k) => {
      const timeline = run.devices![k]!.timeline;
      expect(d.name).toBe(`cuda:${k}`);
      expect(d.t).toEqual(timeline.tMs.map((ms) => Math.round(ms * 1000) / 1e6));
      expect(d.allocated).toEqual(timeline.allocatedBytes);
      expect(d.reserved).toEqual(timeline.reservedBytes);
    });
    expect(new Set(pool.devices!.map((d) => d.color)).size).toBe(2);
    expect(pool.phases.map((p) => p.name)).toEqual(['epoch 1', 'epoch 2', 'epoch 3', 'epoch 4']);
    expect(data.timelines[1]!.t.length).toBeGreaterThan(1000);
  });

  it("tables each device's peaks and remote rows under its chart, and says the row is over several devices", () => {
    const figure = /<figure class="timeline devices" data-run="0">[\s\S]*?<\/figure>/.exec(html)![0];
    expect(figure).toContain('<canvas id="timeline-0"');
    const rows = [...figure.matchAll(/<tr><th scope="row">[\s\S]*?<\/tr>/g)].map((m) =>
      m[0]
        .replace(/<[^>]+>/g, ' ')
        .replace(/\s+/g, ' ')
        .trim(),
    );
    expect(rows).toEqual([
      `cuda:0 ${formatBytes(108 * MiB)} ${formatBytes(128 * MiB)} 900 / 880 of 1,000`,
      `cuda:1 ${formatBytes(118 * MiB)} ${formatBytes(128 * MiB)} 901 / 881 of 1,000`,
    ]);
    expect(html).toMatch(/<small class="devices">over 2 devices<\/small>/);
    expect(html).toMatch(/A run over several devices has a pair of lines per device/);
    // the failed run over several devices shows its message as the other failures do
    expect(html).toMatch(/<figure class="timeline failed" data-run="2">[\s\S]*rank 1 of 2 failed: OutOfMemoryError/);
  });

  it('stays one self-contained page', () => {
    const references = [...html.matchAll(/\b(?:src|href|action|poster)\s*=\s*["']?([^"'\s>]*)/gi)].map((m) => m[1]!);
    for (const ref of references) expect(ref).not.toMatch(/^(?:[a-z][a-z0-9+.-]*:|\/\/)/i);
    expect(html).not.toMatch(/<link\b/i);
    const scripts = [...html.matchAll(/<script\b([^>]*)>/gi)].map((m) => m[1]!);
    expect(scripts).toHaveLength(3);
    for (const attrs of scripts) expect(attrs).not.toMatch(/\bsrc\s*=/i);
  });
});

describe('the Chrome trace of runs over several devices', () => {
  const result = sampleDevicesCompareResult();
  const trace = toChromeTrace(result);
  const of = <P extends ChromeTraceEvent['ph']>(ph: P) =>
    trace.traceEvents.filter((e): e is Extract<ChromeTraceEvent, { ph: P }> => e.ph === ph);

  it("has a process per rank after the runs', named by run and device and sorted after them", () => {
    expect(trace.metadata.processes).toEqual([
      { pid: 1, allocator: 'pool', status: 'ok' },
      { pid: 2, allocator: 'async', status: 'ok' },
      { pid: 3, allocator: 'cuda', status: 'oom' },
      { pid: 4, allocator: 'pool', status: 'ok', rank: 0, device: 'cuda:0' },
      { pid: 5, allocator: 'pool', status: 'ok', rank: 1, device: 'cuda:1' },
    ]);
    const names = of('M').filter((e) => e.name === 'process_name');
    expect(names.map((e) => [e.pid, e.args.name])).toEqual([
      [1, 'pool'],
      [2, 'async'],
      [3, 'cuda'],
      [4, 'pool: cuda:0'],
      [5, 'pool: cuda:1'],
    ]);
    const order = of('M').filter((e) => e.name === 'process_sort_index');
    expect(order.map((e) => [e.pid, e.args.sort_index])).toEqual([
      [1, 0],
      [2, 1],
      [3, 2],
      [4, 3],
      [5, 4],
    ]);
  });

  it("gives each rank's process its device's counter tracks and epochs, and the run's own process the run's epochs", () => {
    const counters = of('C');
    for (const [pid, k] of [
      [4, 0],
      [5, 1],
    ] as const) {
      const timeline = result.runs[0]!.devices![k]!.timeline;
      for (const name of ['allocated', 'reserved'] as const) {
        const track = counters.filter((e) => e.pid === pid && e.name === name);
        expect(track.map((e) => e.ts)).toEqual(timeline.tMs.map((ms) => Math.round(ms * 1e6) / 1e3));
        expect(track.map((e) => e.args.bytes)).toEqual(name === 'allocated' ? timeline.allocatedBytes : timeline.reservedBytes);
      }
      const epochs = of('X').filter((e) => e.pid === pid);
      expect(epochs.map((e) => e.name)).toEqual(['epoch 1', 'epoch 2', 'epoch 3', 'epoch 4']);
      expect(epochs[0]!.args).toEqual({ rank: k, device: `cuda:${k}` });
    }
    expect(counters.filter((e) => e.pid === 1)).toEqual([]);
    expect(of('X').filter((e) => e.pid === 1)).toHaveLength(4);
  });
});
