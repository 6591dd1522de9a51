import { describe, expect, it } from 'vitest';
import { createAllocator } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import {
  compileTrace,
  findMinCapacity,
  profileReplay,
  recommendStrategy,
  replayTrace,
  type RecordedBaseline,
  type ReplayResult,
  type TraceEvent,
} from '@gpumem/trace';
import { replayToCompareResult, type ReplayReportRow } from './from-replay.js';
import { renderHtmlReport } from './report-html.js';

const KiB = 1024;
const MiB = 1024 * KiB;
let clock = 0;
const ev = (action: TraceEvent['action'], ptr: number, bytes: number): TraceEvent => {
  clock += 1_000_000;
  return { timeNs: clock, action, ptr, bytes, stream: 0, tag: 0 };
};
const compiled = compileTrace({
  header: { source: 'test' },
  events: [
    ev('alloc', 1, 3 * MiB),
    ev('alloc', 2, 100 * KiB),
    ev('free', 2, 100 * KiB),
    ev('alloc', 3, 1.5 * MiB),
    ev('free', 1, 3 * MiB),
    ev('free', 3, 1.5 * MiB),
  ],
});

function rowOf(label: string, name: string, options: Record<string, unknown> = {}): ReplayReportRow & { memory: 'host' | 'device' } {
  const allocator = createAllocator(name, options);
  try {
    const result = replayTrace(compiled, allocator, { repeats: 1 });
    const profile = profileReplay(compiled, { name, options });
    const minCapacity = findMinCapacity(compiled, { name, options }, { capBytes: 64 * MiB, resolutionBytes: 64 * KiB });
    return { label, result, profile, minCapacity, memory: name === 'host' ? 'host' : 'device' };
  } finally {
    allocator.dispose();
  }
}

const baseline: RecordedBaseline = {
  label: 'PyTorch caching allocator (recorded)',
  peakReservedBytes: 6 * MiB,
  peakAllocatedBytes: 4.5 * MiB,
  driverAllocs: 3,
  driverFrees: 0,
  reservedTimeline: { timeNs: [1_000_000, 4_000_000], reservedBytes: [4 * MiB, 6 * MiB] },
  allocatedAtPeakBytes: 4.5 * MiB,
  fragmentationAtPeakBytes: 1.5 * MiB,
};

describe('replayToCompareResult', () => {
  const rows: ReplayReportRow[] = [
    rowOf('host', 'host'),
    rowOf('pool', 'pool', { upstream: 'host' }),
    { label: 'broken', error: 'TypeError: no' },
  ];
  // 'pool' stands for a device strategy (its host twin, as without a GPU); 'host' keeps host memory
  const advice = recommendStrategy(rows, { minCapacity: true, baseline, gpu: true });
  const result = replayToCompareResult({
    file: 'run.jsonl',
    format: 'jsonl',
    origin: 'test',
    summary: '6 events',
    compiled,
    rows,
    baseline,
    device: 'host (no GPU)',
    advice,
    createdAt: '2026-01-01T00:00:00.000Z',
  });

  it('makes one run per strategy and one for the recorded baseline, with the replay columns and best values', () => {
    expect(result.runs.map((r) => [r.allocator, r.status])).toEqual([
      ['host', 'ok'],
      ['pool', 'ok'],
      ['broken', 'error'],
      [baseline.label, 'ok'],
    ]);
    expect(result.replay).toMatchObject({ trace: 'run.jsonl', format: 'jsonl', summary: '6 events' });
    expect(result.hiddenColumns).toEqual(['medianEpochMs', 'throughput', 'finalLoss', 'accuracy']);
    expect(result.extraColumns!.map((c) => c.key)).toEqual(['minCapacity', 'unusedAtPeakReserved', 'nsPerCall', 'nsPerAlloc', 'nsPerFree']);
    const min = result.extraColumns!.find((c) => c.key === 'minCapacity')!;
    // host needs the least (4.5 MiB) but keeps host memory: not ranked, so the device strategy is marked
    expect(min.best).toEqual(['pool']);
    expect(result.runs[0]!.extra!.minCapacity!.text).toBe('4.50 MiB');
    expect(result.runs[3]!.extra!.minCapacity).toEqual({ text: '6.00 MiB', mark: '\u2020' }); // a footnote, not the best mark (*)
    expect(result.notes!.some((n) => n.startsWith('\u2020 PyTorch caching allocator (recorded)'))).toBe(true);
    expect(result.best.peakReservedBytes).toBeUndefined(); // memory is ranked by the min capacity here
    expect(result.runs[1]!).toMatchObject({
      upstreamAllocCalls: rows[1]!.profile!.driverAllocs,
      peakReservedBytes: rows[1]!.result!.peakReservedBytes,
    });
  });

  it("marks exactly the recommendation's picks: no host strategy, no recorded allocator, nothing it does not rank", () => {
    const marked = new Map<string, string[]>();
    for (const c of result.extraColumns!) if (c.best) marked.set(c.key, c.best);
    for (const [column, labels] of Object.entries(result.best)) marked.set(column, labels);
    expect(Object.fromEntries(marked)).toEqual({
      minCapacity: advice.memory!.labels,
      nsPerCall: advice.speed!.labels,
      upstreamCalls: advice.driverCalls!.labels,
    });
    expect(advice.memory!.labels).toEqual(['pool']);
    for (const labels of marked.values()) {
      expect(labels).not.toContain('host');
      expect(labels).not.toContain(baseline.label);
    }
    expect(result.recommendation).toEqual(advice.lines);
    expect(result.tied).toEqual({});
  });

  it("draws each strategy's timeline and the baseline's on the trace's clock", () => {
    expect(result.runs[0]!.timeline!.tMs).toEqual([1, 2, 3, 4, 5, 6]);
    expect(result.runs[0]!.timeline!.allocatedBytes).toEqual([3 * MiB, 3 * MiB + 100 * KiB, 3 * MiB, 4.5 * MiB, 1.5 * MiB, 0]);
    const p = result.runs[3]!.timeline!;
    expect(p.tMs).toEqual([1, 2, 3, 4, 5, 6]);
    expect(p.reservedBytes).toEqual([4 * MiB, 4 * MiB, 4 * MiB, 6 * MiB, 6 * MiB, 6 * MiB]);
    expect(p.allocatedBytes[3]).toBe(4.5 * MiB);
  });

  it('renders as a replay report: the trace, the recommendation, the extra columns, no epoch section', () => {
    const html = renderHtmlReport(result);
    expect(html).toContain('<title>gpumem replay: run.jsonl</title>');
    expect(html).toContain('<dt>Trace</dt>');
    expect(html).toMatch(/<div class="recommendation">.*Least memory: pool needs /s);
    expect(html).toContain('Min capacity');
    expect(html).toContain('Unused at peak reserved');
    expect(html).not.toContain('Fragmentation at peak');
    expect(html).toContain('6.00 MiB<sup>\u2020</sup>');
    expect(html).not.toContain('id="epochs"');
    expect(html).not.toContain('>Median epoch');
    expect(html).toContain("time in the trace (the recording's clock)");
    expect(html).toMatch(/data-allocator="pool">.*class="num best" >?/s);
  });

  it("stacks a tagged trace's allocated bytes by tag (a snapshot's frames) and says which hold the peak", () => {
    const tagged = compileTrace({
      header: { source: 'test', tags: ['other', 'train.py:42:forward', 'model.py:31:attention'] },
      events: [
        { ...ev('alloc', 1, 3 * MiB), tag: 1 },
        { ...ev('alloc', 2, MiB), tag: 2 },
        { ...ev('alloc', 3, 512), tag: 0 },
        { ...ev('free', 2, MiB), tag: 2 },
        { ...ev('free', 1, 3 * MiB), tag: 1 },
      ],
    });
    const profile = profileReplay(tagged, { name: 'pool', options: { upstream: 'host' } });
    const allocator = createAllocator('pool', { upstream: 'host' });
    let replayed: ReplayResult;
    try {
      replayed = replayTrace(tagged, allocator, { repeats: 1 });
    } finally {
      allocator.dispose();
    }
    const r = replayToCompareResult({
      file: 's.pickle',
      format: 'torch-snapshot',
      origin: 'test',
      summary: '',
      compiled: tagged,
      rows: [{ label: 'pool', result: replayed, profile }],
      device: 'host (no GPU)',
    });
    const run = r.runs[0]!;
    expect(run.timeline!.tags).toEqual(['other', 'train.py:42:forward', 'model.py:31:attention']);
    expect(run.peakBreakdown).toEqual([
      { tag: 'train.py:42:forward', bytes: 3 * MiB },
      { tag: 'model.py:31:attention', bytes: MiB },
      { tag: 'other', bytes: 512 },
    ]);
    const html = renderHtmlReport(r);
    expect(html).toContain('by where they were allocated');
    expect(html).toContain('<th scope="row">train.py:42:forward</th>');
  });
});
