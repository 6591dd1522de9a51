import { describe, expect, it } from 'vitest';
import { formatBytes } from '@gpumem/allocator-core';
import { sampleCompareResult } from './fixture.js';
import { MAX_REPORT_TIMELINE_POINTS, renderHtmlReport } from './report-html.js';
import { capTimeline, cleanTimeline } from './timeline.js';
import { toChromeTrace, type ChromeTraceEvent } from './trace-json.js';
import type { CompareColumn, CompareResult, TimelineSeries } from './types.js';

const hostileName = `<img src=x onerror="alert(1)">&'x'`;
const hostileError = `boom </script><script>alert(2)</script> & <b>bold</b>`;

/** The JSON the page's script draws from, read back out of the HTML. */
function embeddedData(html: string): {
  yMax: number;
  timelines: { canvasId: string; allocator: string; t: number[]; allocated: number[]; reserved: number[]; phases: unknown[] }[];
  epochChart: { type: string; labels: string[]; datasets: { allocator: string; epochMs: (number | null)[] }[] } | null;
} {
  const match = /<script type="application\/json" id="gpumem-data">([\s\S]*?)<\/script>/.exec(html);
  expect(match, 'the embedded chart data').not.toBeNull();
  return JSON.parse(match![1]!);
}

/** The `<tr class="run ...">` rows of the comparison table, in order. */
function runRows(html: string): string[] {
  return [...html.matchAll(/<tr class="run run-[^"]*"[^>]*>[\s\S]*?<\/tr>/g)].map((m) => m[0]);
}

/**
 * A timeline of `n` points: a sawtooth of allocated bytes with one spike to 9 MB at `spikeAt` and one
 * dip to 1 B at `dipAt`; reserved bytes 2 MB (or the allocated bytes, where higher), with one spike
 * to 7 MB a third of the way further on.
 */
function longTimeline(n: number, spikeAt: number, dipAt: number): TimelineSeries {
  const tMs = Array.from({ length: n }, (_, i) => i * 0.25);
  const allocatedBytes = tMs.map((_, i) => (i === spikeAt ? 9_000_000 : i === dipAt ? 1 : 1_000_000 + (i % 100) * 1000));
  const reservedSpike = (spikeAt + Math.floor(n / 3)) % n;
  const reservedBytes = allocatedBytes.map((a, i) => (i === reservedSpike ? 7_000_000 : Math.max(a, 2_000_000)));
  return { tMs, allocatedBytes, reservedBytes };
}

describe('the fixture', () => {
  it('has four runs, one of them out of memory, with timelines of thousands of points', () => {
    const result = sampleCompareResult();
    expect(result.runs.map((r) => [r.allocator, r.status])).toEqual([
      ['cuda', 'ok'],
      ['pool', 'ok'],
      ['async', 'ok'],
      ['arena', 'oom'],
    ]);
    for (const run of result.runs) {
      expect(run.timeline!.tMs.length).toBeGreaterThan(run.status === 'ok' ? 3000 : 500);
      expect(run.phases.length).toBe(run.epochs.length);
    }
    expect(result.best.medianEpochMs).toEqual(['pool']);
    expect(sampleCompareResult()).toEqual(result);
  });
});

describe('renderHtmlReport', () => {
  const result = sampleCompareResult();
  const html = renderHtmlReport(result);

  it('is one self-contained page: no external src, href, import or url()', () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    const references = [...html.matchAll(/\b(?:src|href|action|poster)\s*=\s*["']?([^"'\s>]*)/gi)].map((m) => m[1]!);
    for (const ref of references) expect(ref).not.toMatch(/^(?:[a-z][a-z0-9+.-]*:|\/\/)/i);
    expect(html).not.toMatch(/<link\b/i);
    expect(html).not.toMatch(/@import|url\(\s*["']?(?:https?:)?\/\//i);
    expect(html).not.toMatch(/sourceMappingURL/);
    const scripts = [...html.matchAll(/<script\b([^>]*)>/gi)].map((m) => m[1]!);
    expect(scripts).toHaveLength(3);
    for (const attrs of scripts) expect(attrs).not.toMatch(/\bsrc\s*=/i);
    // Chart.js itself is inlined.
    expect(html).toMatch(/Chart\.js v\d+\.\d+\.\d+/);
    expect(html.length).toBeGreaterThan(150_000);
  });

  it('has a header with the workload, device, date and what "best" means', () => {
    expect(html).toContain(`<title>gpumem compare: ${result.workload.title}</title>`);
    expect(html).toContain(result.device);
    expect(html).toContain('2025-06-02 14:03:27 UTC');
    expect(html).toMatch(/marks the best value of each column/);
  });

  it('has one table row per run, in run order, with the figures formatted', () => {
    const rows = runRows(html);
    expect(rows).toHaveLength(result.runs.length);
    rows.forEach((row, i) => {
      const run = result.runs[i]!;
      expect(row).toContain(`data-allocator="${run.allocator}"`);
      expect(row).toContain(formatBytes(run.peakAllocatedBytes!));
      expect(row).toContain(formatBytes(run.peakReservedBytes!));
      expect(row).toContain(`${run.upstreamAllocCalls!.toLocaleString('en-US')} / ${run.upstreamFreeCalls!.toLocaleString('en-US')}`);
      expect(row).toContain(run.status === 'ok' ? '>OK<' : '>OOM<');
      if (run.status === 'ok') {
        expect(row).toContain(`${Math.round(run.throughput!).toLocaleString('en-US')} nodes/s`);
        expect(row).toContain(`${(run.accuracy! * 100).toFixed(2)}%`);
      }
    });
    // The OOM run's message is shown with its row.
    expect(html).toContain(`<div class="error-message">${result.runs[3]!.error!.replace(/'/g, '&#39;')}</div>`);
  });

  it('marks exactly the best values that result.best names', () => {
    const marked = new Set<string>();
    runRows(html).forEach((row, i) => {
      for (const m of row.matchAll(/<td class="num best" data-column="([a-zA-Z]+)">/g)) marked.add(`${result.runs[i]!.allocator}:${m[1]}`);
    });
    const expected = new Set<string>();
    for (const [column, allocators] of Object.entries(result.best) as [CompareColumn, string[]][]) {
      for (const allocator of allocators) expected.add(`${allocator}:${column}`);
    }
    expect(expected.size).toBeGreaterThan(5);
    expect(marked).toEqual(expected);
    expect(html.match(/<span class="best-mark" title="best">/g)).toHaveLength(expected.size);
  });

  it('draws a timeline for each successful run and shows the failed one without a chart', () => {
    const data = embeddedData(html);
    expect(data.timelines.map((t) => t.allocator)).toEqual(['cuda', 'pool', 'async']);
    data.timelines.forEach((t, i) => {
      const run = result.runs[i]!;
      expect(html).toContain(`<canvas id="${t.canvasId}"`);
      expect(t.t).toHaveLength(run.timeline!.tMs.length);
      expect(t.allocated).toEqual(run.timeline!.allocatedBytes);
      expect(t.phases).toHaveLength(run.phases.length);
      expect(Math.max(...t.reserved)).toBeLessThanOrEqual(data.yMax);
    });
    expect(html).not.toContain('id="timeline-3"');
    const failed = /<figure class="timeline failed" data-run="3">([\s\S]*?)<\/figure>/.exec(html);
    expect(failed).not.toBeNull();
    expect(failed![1]).toContain('Statistics at the failure');
    expect(failed![1]).toContain('1 of 6 epochs completed');
    expect(failed![1]).toContain(formatBytes(result.runs[3]!.stats!.reservedBytes));
    expect(data.epochChart!.type).toBe('bar');
    expect(data.epochChart!.labels).toEqual(['epoch 1', 'epoch 2', 'epoch 3', 'epoch 4', 'epoch 5', 'epoch 6']);
    expect(data.epochChart!.datasets.map((d) => d.epochMs.filter((v) => v !== null).length)).toEqual([6, 6, 6, 1]);
  });

  it('escapes every name and message that comes from the data', () => {
    const hostile = sampleCompareResult();
    hostile.runs[1]!.allocator = hostileName;
    hostile.runs[3]!.error = hostileError;
    hostile.best = { medianEpochMs: [hostileName] };
    hostile.workload.title = '<i>title</i>';
    const page = renderHtmlReport(hostile);
    expect(page).not.toContain(hostileName);
    expect(page).not.toContain('<img');
    expect(page).not.toContain('alert(2)</script>');
    expect(page).not.toContain('<i>title</i>');
    expect(page).not.toContain('<b>bold</b>');
    expect(page).toContain('&#60;img src=x onerror=&#34;alert(1)&#34;&#62;&#38;&#39;x&#39;');
    expect(page).toContain('boom &#60;/script&#62;&#60;script&#62;alert(2)&#60;/script&#62; &#38; &#60;b&#62;bold&#60;/b&#62;');
    // In the script data it is a plain JSON string with no '<'.
    expect(embeddedData(page).timelines[1]!.allocator).toBe(hostileName);
    expect(runRows(page)).toHaveLength(4);
    expect(runRows(page)[1]).toContain('<td class="num best" data-column="medianEpochMs">');
  });

  it('caps what it embeds for a timeline longer than it should be, keeping the peaks', () => {
    const big = sampleCompareResult();
    big.runs[0]!.timeline = longTimeline(60_000, 41_234, 12_345);
    const data = embeddedData(renderHtmlReport(big));
    const t = data.timelines[0]!;
    expect(t.t.length).toBeLessThanOrEqual(MAX_REPORT_TIMELINE_POINTS);
    // At least one point per bucket of four.
    expect(t.t.length).toBeGreaterThan(MAX_REPORT_TIMELINE_POINTS / 4);
    expect(Math.max(...t.allocated)).toBe(9_000_000);
    expect(Math.min(...t.allocated)).toBe(1);
    expect(t.reserved).toContain(7_000_000);
    expect(t.t.at(-1)).toBeCloseTo((59_999 * 0.25) / 1000, 9);
  });

  it('renders a result where every run failed before an epoch', () => {
    const failed: CompareResult = { ...sampleCompareResult(), best: {} };
    failed.runs = failed.runs.map((run) => ({
      ...run,
      status: 'error',
      error: 'no CUDA device',
      epochs: [],
      phases: [],
      timeline: null,
      stats: null,
    }));
    const page = renderHtmlReport(failed);
    expect(runRows(page)).toHaveLength(4);
    expect(page).toContain('No run completed an epoch.');
    expect(page).toContain('No statistics were taken before the failure.');
    expect(page).not.toContain('class="num best"');
    const data = embeddedData(page);
    expect(data.timelines).toEqual([]);
    expect(data.epochChart).toBeNull();
  });
});

describe('cleanTimeline and capTimeline', () => {
  it('drops non-finite points, sorts by time and trims to the shortest array', () => {
    const clean = cleanTimeline({ tMs: [3, 1, Number.NaN, 2, 9], allocatedBytes: [30, 10, 5, 20, 90], reservedBytes: [31, 11, 6, 21] });
    expect(clean).toEqual({ tMs: [1, 2, 3], allocatedBytes: [10, 20, 30], reservedBytes: [11, 21, 31] });
  });

  it('returns short series whole and long ones within the bound, with first, last, highs and lows', () => {
    const short = longTimeline(100, 10, 20);
    expect(capTimeline(short, 100)).toEqual(short);
    const long = longTimeline(100_000, 77_777, 3);
    const capped = capTimeline(long, 1000);
    expect(capped.tMs.length).toBeLessThanOrEqual(1000);
    expect(capped.tMs[0]).toBe(0);
    expect(capped.tMs.at(-1)).toBe(long.tMs.at(-1));
    expect(capped.tMs.every((t, i) => i === 0 || capped.tMs[i - 1]! < t)).toBe(true);
    expect(capped.allocatedBytes).toContain(9_000_000);
    expect(capped.allocatedBytes).toContain(1);
    expect(capped.reservedBytes).toContain(7_000_000);
  });

  it('rejects a bound it cannot honour', () => {
    expect(() => capTimeline(longTimeline(10, 1, 2), 3)).toThrow(/Expected an integer of at least 6 for maxPoints but received 3/);
    expect(() => capTimeline(longTimeline(10, 1, 2), 10.5)).toThrow(RangeError);
  });
});

describe('toChromeTrace', () => {
  const result = sampleCompareResult();
  const trace = toChromeTrace(result);
  const events = trace.traceEvents;
  const of = <P extends ChromeTraceEvent['ph']>(ph: P) => events.filter((e): e is Extract<ChromeTraceEvent, { ph: P }> => e.ph === ph);

  it('is the JSON object form, and survives JSON.stringify and parse unchanged', () => {
    expect(trace.displayTimeUnit).toBe('ms');
    expect(Array.isArray(events)).toBe(true);
    expect(trace.metadata.device).toBe(result.device);
    expect(trace.metadata.processes.map((p) => p.allocator)).toEqual(['cuda', 'pool', 'async', 'arena']);
    expect(JSON.parse(JSON.stringify(trace))).toEqual(trace);
    for (const e of events) {
      expect(Number.isSafeInteger(e.pid) && e.pid > 0).toBe(true);
      if ('ts' in e) expect(Number.isFinite(e.ts) && e.ts >= 0).toBe(true);
    }
  });

  it('names one process per allocator, sorted in run order', () => {
    const names = of('M').filter((e) => e.name === 'process_name');
    expect(names.map((e) => [e.pid, e.args.name])).toEqual([
      [1, 'cuda'],
      [2, 'pool'],
      [3, 'async'],
      [4, 'arena'],
    ]);
    const order = of('M').filter((e) => e.name === 'process_sort_index');
    expect(order.map((e) => [e.pid, e.args.sort_index])).toEqual([
      [1, 0],
      [2, 1],
      [3, 2],
      [4, 3],
    ]);
    const labels = of('M').filter((e) => e.name === 'process_labels');
    expect(labels).toHaveLength(1);
    expect(labels[0]!.pid).toBe(4);
    expect(String(labels[0]!.args.labels)).toContain('oom: arena: could not allocate');
  });

  it('has allocated and reserved counter tracks with numeric values and ascending microsecond timestamps', () => {
    const counters = of('C');
    result.runs.forEach((run, i) => {
      for (const name of ['allocated', 'reserved'] as const) {
        const track = counters.filter((e) => e.pid === i + 1 && e.name === name);
        const source = name === 'allocated' ? run.timeline!.allocatedBytes : run.timeline!.reservedBytes;
        expect(track).toHaveLength(source.length);
        expect(track.map((e) => e.args.bytes)).toEqual(source);
        track.forEach((e, k) => {
          expect(typeof e.args.bytes).toBe('number');
          expect(e.ts).toBeCloseTo(run.timeline!.tMs[k]! * 1000, 3);
          if (k > 0) expect(e.ts).toBeGreaterThanOrEqual(track[k - 1]!.ts);
        });
      }
    });
  });

  it('has a complete event per epoch, on the same clock, with the epoch figures', () => {
    const slices = of('X');
    expect(slices).toHaveLength(result.runs.reduce((n, run) => n + run.phases.length, 0));
    result.runs.forEach((run, i) => {
      const own = slices.filter((e) => e.pid === i + 1);
      expect(own.map((e) => e.name)).toEqual(run.phases.map((p) => p.name));
      own.forEach((e, k) => {
        expect(e.ts).toBeCloseTo(run.phases[k]!.startMs * 1000, 3);
        expect(e.dur).toBeCloseTo((run.phases[k]!.endMs - run.phases[k]!.startMs) * 1000, 3);
        expect(e.args.loss).toBe(run.epochs[k]!.loss);
      });
    });
  });

  it('marks where the failed run stopped', () => {
    const instants = of('i');
    expect(instants).toHaveLength(1);
    expect(instants[0]).toMatchObject({ pid: 4, name: 'out of memory', s: 'p' });
    expect(instants[0]!.ts).toBeCloseTo(result.runs[3]!.timeline!.tMs.at(-1)! * 1000, 3);
  });

  it('caps a long timeline and keeps its peak', () => {
    const big = sampleCompareResult();
    big.runs[0]!.timeline = longTimeline(250_000, 200_001, 5);
    const track = toChromeTrace(big).traceEvents.filter(
      (e): e is Extract<ChromeTraceEvent, { ph: 'C' }> => e.ph === 'C' && e.pid === 1 && e.name === 'allocated',
    );
    expect(track.length).toBeLessThanOrEqual(100_000);
    expect(Math.max(...track.map((e) => e.args.bytes))).toBe(9_000_000);
  });
});
