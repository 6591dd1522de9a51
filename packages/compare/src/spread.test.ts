import { describe, expect, it } from 'vitest';
import { outsideAllocatorNote, rankRuns } from './compare.js';
import { mergeRepeats } from './repeat.js';
import { recommendRuns } from './recommendation.js';
import { epochsAfterWarmup, minMeasuredEpochs, spreadOf, spreadsOverlap, warmupEpochsOf } from './spread.js';
import type { CompareRun } from './types.js';

function run(allocator: string, epochMs: number[], extra: Partial<CompareRun> = {}): CompareRun {
  const epochs = epochMs.map((ms, epoch) => ({
    epoch,
    epochMs: ms,
    startMs: epoch * ms,
    loss: 1,
    accuracy: 0.5,
    trainAccuracy: 0.5,
    peakAllocatedBytes: 100,
    peakReservedBytes: 200,
  }));
  const warmupEpochs = warmupEpochsOf(epochs.length);
  const epochSpread = spreadOf(epochMs.slice(warmupEpochs));
  return {
    allocator,
    status: 'ok',
    epochs: epochs as unknown as CompareRun['epochs'],
    warmupEpochs,
    medianEpochMs: epochSpread?.median ?? null,
    epochSpread,
    repeats: 1,
    throughput: epochSpread ? 1000 / (epochSpread.median / 1000) : null,
    peakAllocatedBytes: 100,
    peakReservedBytes: 200,
    overhead: 2,
    upstreamAllocCalls: 1,
    upstreamFreeCalls: 1,
    oomCount: 0,
    finalLoss: 1,
    accuracy: 0.5,
    stats: null,
    wallMs: 10,
    timeline: null,
    phases: [],
    eventsRecorded: 0,
    eventsDropped: 0,
    ...extra,
  };
}

describe('spreads', () => {
  it('summarises with quartiles and leaves the first epoch out as warm-up', () => {
    expect(spreadOf([])).toBeNull();
    expect(spreadOf([4, 1, 3, 2])).toEqual({ n: 4, min: 1, q1: 1.75, median: 2.5, q3: 3.25, max: 4 });
    expect(warmupEpochsOf(1)).toBe(0);
    expect(warmupEpochsOf(3)).toBe(1);
    expect(run('a', [900, 300, 310]).medianEpochMs).toBe(305);
  });

  it('overlap uses min–max for few epochs and the interquartile range for many', () => {
    expect(spreadsOverlap(spreadOf([1, 2])!, spreadOf([2, 3])!)).toBe(true);
    expect(spreadsOverlap(spreadOf([1, 2])!, spreadOf([2.5, 3])!)).toBe(false);
    // within 1%: a tie, even when the ranges do not touch (two runs at 36.4 ms an epoch)
    expect(spreadsOverlap(spreadOf([36.37, 36.38])!, spreadOf([36.39, 36.4])!)).toBe(true);
    expect(spreadsOverlap(spreadOf([36.0, 36.1])!, spreadOf([37.0, 37.1])!)).toBe(false);
    const many = (lo: number) => spreadOf([lo, lo + 1, lo + 2, lo + 3, lo + 4, lo + 5, lo + 6, lo + 100])!;
    // min–max would overlap (the outlier), the quartiles do not
    expect(spreadsOverlap(many(0), many(10))).toBe(false);
  });
});

describe('ranking runs', () => {
  it('marks a best time only when it is better beyond the spread; otherwise the rows tie', () => {
    const clear = rankRuns([run('pool', [500, 300, 305, 302, 301, 304]), run('cuda', [700, 580, 590, 585, 588, 583])]);
    expect(clear.best.medianEpochMs).toEqual(['pool']);
    expect(clear.best.throughput).toEqual(['pool']);
    expect(clear.tied.medianEpochMs).toBeUndefined();
    expect(clear.timesNotRanked).toBeUndefined();
    const close = rankRuns([
      run('pool', [500, 300, 340, 320, 310, 330]),
      run('async', [600, 330, 360, 350, 345, 355]),
      run('cuda', [700, 580, 590, 585, 588, 583]),
    ]);
    expect(close.best.medianEpochMs).toBeUndefined();
    expect(close.tied.medianEpochMs).toEqual(['pool', 'async']);
    expect(close.tied.throughput).toEqual(['pool', 'async']);
    // exact columns are unaffected by the spread
    expect(close.best.peakAllocatedBytes).toEqual(['pool', 'async', 'cuda']);
  });

  it('ranks failed runs nowhere', () => {
    const r = rankRuns([run('pool', [500, 300, 305, 302, 301, 304]), run('cuda', [10, 10, 10], { status: 'oom' })]);
    expect(r.best.medianEpochMs).toEqual(['pool']);
  });

  it(`names no winner in time from fewer than ${minMeasuredEpochs} measured epochs a row, and says why`, () => {
    // one epoch each (the warm-up is all that was timed), 10% apart: no best, no tie
    const one = rankRuns([run('host', [5010]), run('pinned', [2866])]);
    expect(one.best.medianEpochMs).toBeUndefined();
    expect(one.best.throughput).toBeUndefined();
    expect(one.tied.medianEpochMs).toBeUndefined();
    expect(one.timesNotRanked).toEqual({
      measuredEpochs: 0,
      minimum: minMeasuredEpochs,
      reason: `not enough samples (0 measured epochs after the warm-up, at least ${minMeasuredEpochs} needed)`,
    });
    // the memory columns are counts, ranked from one epoch
    expect(one.best.peakReservedBytes).toEqual(['host', 'pinned']);
    // four measured epochs in one row are too few, even where the other has plenty
    const few = rankRuns([run('pool', [500, 300, 305, 302, 301]), run('cuda', [700, 580, 590, 585, 588, 583])]);
    expect(few.best.medianEpochMs).toBeUndefined();
    expect(few.timesNotRanked?.measuredEpochs).toBe(4);
    expect(epochsAfterWarmup(run('a', [1, 2, 3]))).toBe(2);
    expect(epochsAfterWarmup(run('a', [1]))).toBe(0);
  });
});

describe('the recommendation', () => {
  /** What the picks say, checked against the marks of the same ranking. */
  function agrees(runs: CompareRun[]): ReturnType<typeof recommendRuns> {
    const ranking = rankRuns(runs);
    const rec = recommendRuns(runs, ranking);
    expect(rec.picks.leastMemory?.allocators).toEqual(ranking.best.peakReservedBytes);
    const fastest = rec.picks.fastest!;
    if (fastest.verdict === 'clear') expect(fastest.allocators).toEqual(ranking.best.medianEpochMs);
    if (fastest.verdict === 'within-noise') expect(fastest.allocators).toEqual(ranking.tied.medianEpochMs);
    if (fastest.verdict === 'not-enough-samples') {
      expect(ranking.best.medianEpochMs ?? ranking.tied.medianEpochMs).toBeUndefined();
      expect(fastest.reason).toBe(ranking.timesNotRanked!.reason);
    }
    return rec;
  }

  it('picks what the table marks: least memory and the clear fastest, with the runner-up', () => {
    const rec = agrees([
      run('pool', [500, 300, 305, 302, 301, 304], { peakReservedBytes: 300 * 2 ** 20 }),
      run('cuda', [700, 580, 590, 585, 588, 583], { peakReservedBytes: 200 * 2 ** 20 }),
    ]);
    expect(rec.picks.fastest).toEqual({ verdict: 'clear', allocators: ['pool'], medianEpochMs: 302 });
    expect(rec.lines).toEqual([
      'Least memory: cuda, 200.00 MiB peak reserved; next: pool, 300.00 MiB (50% more).',
      'Fastest: pool, 302.0 ms an epoch (median of 5 measured epochs), faster than every other run beyond the spread of their epochs; next: cuda, 585.0 ms (94% slower).',
    ]);
  });

  it('says when the fastest runs are within noise, and when there are too few samples to tell', () => {
    const tied = agrees([
      run('pool', [500, 300, 340, 320, 310, 330]),
      run('async', [600, 330, 360, 350, 345, 355]),
      run('cuda', [700, 580, 590, 585, 588, 583]),
    ]);
    expect(tied.picks.fastest?.verdict).toBe('within-noise');
    expect(tied.lines[1]).toMatch(/^Fastest: no clear winner: pool and async are within noise of each other .*; cuda slower beyond it\.$/);
    const one = agrees([run('host', [5010]), run('pinned', [2866])]);
    expect(one.picks.fastest?.verdict).toBe('not-enough-samples');
    expect(one.lines[1]).toMatch(/^Fastest: not ranked: not enough samples \(0 measured epochs after the warm-up, at least 5 needed\)/);
    expect(one.lines.join('\n')).not.toMatch(/Fastest: (host|pinned)/);
  });

  it('leaves failed runs out, and has nothing to compare with one run', () => {
    const runs = [run('pool', [500, 300, 305, 302, 301, 304]), run('arena', [10], { status: 'oom' })];
    const rec = recommendRuns(runs, rankRuns(runs));
    expect(rec.picks).toEqual({});
    expect(rec.lines).toEqual(['Only pool finished: nothing to compare it with.', 'Not ranked: arena (out of memory).']);
  });
});

describe('repeats', () => {
  it('pools the measured epochs of every repeat, each repeat leaving out its own warm-up', () => {
    const merged = mergeRepeats([run('pool', [900, 300, 310]), run('pool', [950, 320, 330], { peakReservedBytes: 400 })]);
    expect(merged.repeats).toBe(2);
    expect(merged.epochs).toHaveLength(6);
    expect(merged.warmupEpochs).toBe(2);
    expect(merged.epochSpread).toMatchObject({ n: 4, min: 300, max: 330, median: 315 });
    expect(merged.medianEpochMs).toBe(315);
    expect(merged.peakReservedBytes).toBe(400);
    expect(merged.overhead).toBe(4);
  });

  it('a failed repeat fails the row, and one run is kept as is', () => {
    const ok = run('pool', [900, 300, 310]);
    expect(mergeRepeats([ok])).toBe(ok);
    expect(mergeRepeats([ok, run('pool', [], { status: 'error', error: 'boom' })])).toMatchObject({
      status: 'error',
      error: 'boom',
      repeats: 2,
    });
    expect(() => mergeRepeats([])).toThrow(RangeError);
  });
});

describe('memory outside the allocators', () => {
  it('is noted under the table when the runs measured it (on a GPU), and not otherwise', () => {
    const a = run('pool', [500, 300, 305], { outsideAllocator: { atStartBytes: 500 * 2 ** 20, atEndBytes: 532 * 2 ** 20 } });
    const b = run('async', [500, 300, 305], { outsideAllocator: { atStartBytes: 510 * 2 ** 20, atEndBytes: 540 * 2 ** 20 } });
    expect(outsideAllocatorNote([a, b])).toEqual([
      "outside the allocators (not in the peaks above): 510.00 MiB of GPU memory when each run began (the CUDA context and kernels), up to 540.00 MiB at the end (with cuBLAS's handle and state); from cudaMemGetInfo",
    ]);
    expect(outsideAllocatorNote([run('host', [1, 2])])).toEqual([]);
    expect(mergeRepeats([a, { ...a, outsideAllocator: { atStartBytes: 1, atEndBytes: 600 * 2 ** 20 } }]).outsideAllocator).toEqual({
      atStartBytes: 500 * 2 ** 20,
      atEndBytes: 600 * 2 ** 20,
    });
  });
});
