/**
 * diagnoseOom: the three verdicts on traces whose answers are known, on the strategies' host twins
 * (on a GPU, the same strategies over the device), and the figures behind "what would reduce them".
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hasCudaDevice, strategyInfo } from '@gpumem/allocator-core';
import '@gpumem/allocator-caching';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-tiered';
import { type CaseRow, fragmentingRows, trainingRows, trainingTags } from './doctor-cases.testing.js';
import { diagnoseOom, recordedCapacity } from './doctor.js';
import { readTrace, type AllocationTrace } from './format.js';
import { idleTagsAbove, offDevicePlan, transientAtPeak } from './peak-anatomy.js';
import { compileTrace } from './replay.js';

const MiB = 1024 * 1024;

function traceOf(rows: CaseRow[], tags?: string[]): AllocationTrace {
  return {
    header: { source: 'test', ...(tags && { tags }) },
    events: rows.map(([action, ptr, bytes, tag], i) => ({ timeNs: (i + 1) * 1000, action, ptr, bytes, stream: 0, tag: tag ?? 0 })),
  };
}

const fragmenting = traceOf(fragmentingRows);
const training = traceOf(trainingRows, trainingTags);

// traces of a few MiB: no memory outside the allocator unless a test says so
const none = { lowBytes: 0, highBytes: 0, source: 'none' };

const strategies = [
  { label: 'host', name: 'host' },
  { label: 'pool', name: 'pool' },
  { label: 'expandable', name: 'expandable' },
  { label: 'tiered', name: 'tiered' },
];

describe('diagnoseOom', () => {
  it("says fragmentation when PyTorch's default needs more than the capacity and names the strategy that fits", () => {
    const v = diagnoseOom(fragmenting, { capacityBytes: 26 * MiB, strategies, outside: none });
    expect(v.kind).toBe('fragmentation');
    expect(v.liveBytes).toBe(20 * MiB);
    // PyTorch's twin: the 8 MiB request takes a 20 MiB segment of its own
    expect(v.pytorch).toMatchObject({ label: "caching (PyTorch's allocator)", fits: false });
    expect(v.pytorch.needBytes!).toBeGreaterThan(26 * MiB);
    expect(v.pytorch.needBytes!).toBeLessThanOrEqual(40 * MiB + v.pytorch.minCapacity!.resolutionBytes);
    expect(v.lines[0]).toContain("but PyTorch's default allocator (replayed by its twin, the caching strategy) needs");
    expect(v.best).toMatchObject({ label: 'expandable', fits: true });
    expect(v.best!.needBytes).toBeLessThanOrEqual(26 * MiB);
    expect(v.best!.marginBytes).toBe(26 * MiB - v.best!.needBytes);
    expect(v.lines[0]).toMatch(/^Fragmentation: the live bytes peak at 20\.00 MiB, under the capacity of 26\.00 MiB/);
    expect(v.lines[1]).toMatch(/^expandable fits in /);
    expect(v.reductions).toEqual([]);
    // host memory and spilling strategies are listed, never ranked
    expect(v.strategies.filter((s) => !s.ranked).map((s) => s.label)).toEqual(expect.arrayContaining(['host', 'tiered']));
    expect(v.strategies.find((s) => s.label === 'tiered')!.notRankedReason).toMatch(/spills to host memory/);
  });

  it('says fits, naming the strategy needing the least and its margin, and whether PyTorch fits', () => {
    const v = diagnoseOom(fragmenting, { capacityBytes: 64 * MiB, strategies, outside: none });
    expect(v.kind).toBe('fits');
    expect(v.pytorch.fits).toBe(true);
    expect(v.best!.label).toBe('expandable');
    expect(v.best!.marginBytes).toBe(64 * MiB - v.best!.needBytes);
    expect(v.best!.needBytes).toBeGreaterThanOrEqual(20 * MiB);
    expect(v.best!.needBytes).toBeLessThan(v.pytorch.needBytes!);
    expect(v.lines[0]).toContain(`Fits: under expandable, which needs`);
    expect(v.lines[1]).toMatch(
      /^PyTorch's default allocator \(replayed by its twin, the caching strategy\) fits: it needs (39\.\d\d|40\.00) MiB \(\d+\.\d\d MiB to \d+\.\d\d MiB on the device\), \d+\.\d\d MiB to spare at the band's top\.$/,
    );
  });

  it('replays on the host twins where asked: on any machine the figures of a machine without a GPU, device strategies still ranked', () => {
    for (const name of ['pool', 'expandable', 'tiered']) expect(strategyInfo(name).hostTwinOptions).toEqual({ upstream: 'host' });
    const v = diagnoseOom(fragmenting, { capacityBytes: 26 * MiB, strategies, outside: none, hostTwins: true });
    expect(v.kind).toBe('fragmentation');
    expect(v.best).toMatchObject({ label: 'expandable', fits: true });
    expect(v.strategies.find((s) => s.label === 'pool')).toMatchObject({ memory: 'device', ranked: true, fits: false, addressOnly: true });
    // over addresses alone where the registry says a strategy can run so; the others over host memory
    expect(v.strategies.filter((s) => s.addressOnly).map((s) => s.label)).toEqual(expect.arrayContaining(['pool', 'expandable']));
    expect(v.strategies.find((s) => s.label === 'tiered')!.addressOnly).toBeUndefined();
    expect(v.pytorch.needBytes!).toBeGreaterThan(26 * MiB);
    expect(v.pytorch.needBytes!).toBeLessThanOrEqual(40 * MiB + v.pytorch.minCapacity!.resolutionBytes);
    // without a GPU the strategies run on their host twins anyway: the same figures
    if (!hasCudaDevice()) {
      const needs = (x: typeof v) => x.strategies.map((s) => [s.label, s.needBytes, s.fits]);
      expect(needs(v)).toEqual(needs(diagnoseOom(fragmenting, { capacityBytes: 26 * MiB, strategies, outside: none })));
    }
  });

  it('says real when the live bytes exceed the capacity, with what would reduce them', () => {
    const v = diagnoseOom(training, { capacityBytes: 16 * MiB, strategies, outside: none });
    expect(v.kind).toBe('real');
    expect(v.liveBytes).toBe(25 * MiB);
    expect(v.excessBytes).toBe(9 * MiB);
    expect(v.lines[0]).toBe(
      'Real: the live bytes peak at 25.00 MiB, 9.00 MiB more than the capacity of 16.00 MiB; no allocator can run this program in it as it is.',
    );
    const byKind = Object.fromEntries(v.reductions.map((r) => [r.kind, r]));
    // the weights on the host leave 4 + 9 MiB on the device
    expect(byKind['tiered-by-tag']).toMatchObject({
      groups: ['weights'],
      liveAfterBytes: 13 * MiB,
      savedBytes: 12 * MiB,
      reaches: true,
      exact: true,
    });
    // weights and optimizer state make no call while live bytes exceed 16 MiB: asleep then, 16 MiB at most remain
    expect(byKind['sleep-idle-tags']).toMatchObject({
      groups: ['weights', 'optimizer'],
      liveAfterBytes: 16 * MiB,
      reaches: false, // an estimate never reaches, even where its best case does
      exact: false,
    });
    // the step's activations, freed after the peak
    expect(byKind.checkpointing).toMatchObject({ savedBytes: 9 * MiB, liveAfterBytes: 16 * MiB, exact: false, reaches: false });
    expect(v.peak.byTag).toEqual([
      { name: 'weights', bytes: 12 * MiB },
      { name: 'activations', bytes: 9 * MiB },
      { name: 'optimizer', bytes: 4 * MiB },
    ]);
    expect(v.peak.bySizeClass).toEqual([{ name: '1 MiB to 16 MiB', bytes: 25 * MiB }]);
  });

  it('replays a failed request of the recording as an allocation, or leaves it out when asked', () => {
    // 10 MiB requests: PyTorch's segment for each is the request itself
    const failing = traceOf([
      ['alloc', 1, 10 * MiB],
      ['oom', 0, 10 * MiB],
    ]);
    expect(diagnoseOom(failing, { capacityBytes: 16 * MiB, strategies: [], outside: none })).toMatchObject({
      kind: 'real',
      liveBytes: 20 * MiB,
      failedRequests: { count: 1, handling: 'replay' },
    });
    const skipped = diagnoseOom(failing, { capacityBytes: 16 * MiB, strategies: [], outside: none, failedRequests: 'skip' });
    expect(skipped).toMatchObject({ kind: 'fits', liveBytes: 10 * MiB });
    expect(skipped.notes.join('\n')).toContain('1 request failed in the recording and is left out');
  });

  it('refuses a capacity that is not a positive integer', () => {
    for (const capacityBytes of [0, -1, 1.5, Number.NaN])
      expect(() => diagnoseOom(fragmenting, { capacityBytes, strategies })).toThrow(RangeError);
  });

  it("says too close to call when the capacity lies inside the live bytes' band, with the band and the margin", () => {
    const outside = { lowBytes: 0, highBytes: MiB, source: 'test' };
    const v = diagnoseOom(training, { capacityBytes: 25 * MiB + 512 * 1024, strategies, outside });
    expect(v.kind).toBe('too-close');
    expect(v.decision).toMatchObject({
      by: 'live',
      call: 'too-close',
      band: { needBytes: 25 * MiB, lowBytes: 25 * MiB, highBytes: 26 * MiB, outsideLowBytes: 0, outsideHighBytes: MiB, modelErrorBytes: 0 },
      marginBytes: 0, // the capacity is the band's middle
    });
    expect(v.lines[0]).toMatch(/^Too close to call: the live bytes peak at 25\.00 MiB, .* makes 25\.00 MiB to 26\.00 MiB on the device/);
    // what would bring the live bytes under the capacity less the most outside memory
    expect(v.reductions.length).toBeGreaterThan(0);
  });

  it("says too close to call when the capacity lies inside the band of PyTorch's model, never fits or fragmentation", () => {
    const need = diagnoseOom(fragmenting, { capacityBytes: 26 * MiB, strategies, outside: none }).pytorch.needBytes!;
    const outside = { lowBytes: 0, highBytes: MiB, source: 'test' };
    const v = diagnoseOom(fragmenting, { capacityBytes: need + 2 * MiB, strategies, outside });
    expect(v.kind).toBe('too-close');
    expect(v.decision.by).toBe('pytorch');
    // the default ±0.4%, 4 MiB at the least (here the floor: 0.4% of 40 MiB is 164 KiB)
    expect(v.decision.band.modelErrorBytes).toBe(Math.max(Math.ceil(v.pytorch.needBytes! * 0.004), 4 * MiB));
    expect(v.decision.band.lowBytes).toBeLessThanOrEqual(v.capacityBytes);
    expect(v.decision.band.highBytes).toBeGreaterThan(v.capacityBytes);
    // the same capacity with no uncertainty: a plain answer
    const exact = diagnoseOom(fragmenting, {
      capacityBytes: need + 2 * MiB,
      strategies,
      outside: none,
      pytorchModelError: 0,
      pytorchModelErrorFloorBytes: 0,
    });
    expect(exact.kind).toBe('fits');
  });

  it('counts the measured memory outside the allocator by default: 0-250 MiB', () => {
    // 25 MiB live and none outside at the least: more than a 24 MiB device
    const real = diagnoseOom(training, { capacityBytes: 24 * MiB, strategies: [] });
    expect(real).toMatchObject({ kind: 'real', excessBytes: MiB });
    expect(real.uncertainty.outside).toMatchObject({ lowBytes: 0, highBytes: 250 * MiB });
    expect(real.uncertainty.outside.source).toContain('measured on H200s, PyTorch 2.11: 0–250 MiB');
    expect(real.uncertainty).toMatchObject({ pytorchModelError: 0.004, pytorchModelErrorFloorBytes: 4 * MiB });
    // up to 250 MiB outside: a 200 MiB device may or may not hold it
    expect(diagnoseOom(training, { capacityBytes: 200 * MiB, strategies: [] }).kind).toBe('too-close');
    const fits = diagnoseOom(fragmenting, { capacityBytes: 512 * MiB, strategies });
    expect(fits.kind).toBe('fits');
    expect(fits.best!.band.highBytes).toBe(fits.best!.needBytes + 250 * MiB); // gpumem's strategies: no model error
    expect(fits.notes.join('\n')).toMatch(/The deciding band here is .* wide, .*% of the capacity/);
  });

  it('refuses an outside range or a model error that makes no sense', () => {
    const bad = [
      { outside: { lowBytes: 2, highBytes: 1, source: '' } },
      { outside: { lowBytes: -1, highBytes: 1, source: '' } },
      { pytorchModelError: -0.1 },
      { pytorchModelError: Number.NaN },
      { strategyModelError: 1 },
    ];
    for (const o of bad) expect(() => diagnoseOom(fragmenting, { capacityBytes: 64 * MiB, strategies: [], ...o })).toThrow(RangeError);
  });

  it('answers for a trace whose million requests all fail at the capacity: every fits-or-not replay stops at the first', () => {
    // 30 MiB held, then a million 4 MiB requests, each freed at once: at 32 MiB every one fails
    const events: AllocationTrace['events'] = [{ timeNs: 1, action: 'alloc', ptr: 1, bytes: 30 * MiB, stream: 0, tag: 0 }];
    for (let i = 0; i < 1_000_000; i++) {
      events.push({ timeNs: 2 + 2 * i, action: 'alloc', ptr: 2 + i, bytes: 4 * MiB, stream: 0, tag: 0 });
      events.push({ timeNs: 3 + 2 * i, action: 'free', ptr: 2 + i, bytes: 4 * MiB, stream: 0, tag: 0 });
    }
    const v = diagnoseOom({ header: { source: 'test' }, events }, { capacityBytes: 32 * MiB, strategies, outside: none, hostTwins: true });
    expect(v.kind).toBe('real');
    expect(v.liveBytes).toBe(34 * MiB);
    for (const s of v.strategies) expect(s.fits, s.label).toBe(false);
    // the searches go on above the capacity, where the requests fit
    expect(v.strategies.find((s) => s.label === 'expandable')!.needBytes).toBeGreaterThanOrEqual(34 * MiB);
  });

  it('reads no capacity from a trace without an out-of-memory entry of a snapshot', () => {
    expect(recordedCapacity(fragmenting)).toBeUndefined();
  });
});

describe('the peak, taken apart', () => {
  const c = compileTrace(training);

  it('takes tags off the device, largest first, until the live bytes fit', () => {
    expect(offDevicePlan(c, 'tag', 14 * MiB)).toEqual({
      groups: ['weights'],
      movedAtPeakBytes: 12 * MiB,
      peakBytes: 13 * MiB,
      reaches: true,
    });
    // every tag but the last is taken, and the optimizer state alone is still over
    expect(offDevicePlan(c, 'tag', 3 * MiB)).toMatchObject({ groups: ['weights', 'activations'], peakBytes: 4 * MiB, reaches: false });
    expect(offDevicePlan(c, 'stream', 3 * MiB)).toBeUndefined(); // one stream: nothing to move
  });

  it('finds the tags idle while the live bytes exceed a capacity', () => {
    expect(idleTagsAbove(c, 16 * MiB)).toEqual({ tags: ['weights', 'optimizer'], heldAtPeakBytes: 16 * MiB, peakBytes: 16 * MiB });
    expect(idleTagsAbove(c, 30 * MiB)).toBeUndefined();
  });

  it('splits the bytes at the peak into the step and the standing state', () => {
    // the frees after the last allocation are the teardown: the activations count by their allocation after the trough
    expect(transientAtPeak(c)).toEqual({ bytes: 9 * MiB, standingBytes: 16 * MiB, teardownOp: 5 });
  });

  // weights 12 MiB and optimizer 4 MiB, a step of three 3 MiB activations (the peak), a smaller
  // step, then the program frees its weights, logs one small tensor, and frees the rest
  const twoSteps = compileTrace(
    traceOf([
      ['alloc', 1, 12 * MiB],
      ['alloc', 2, 4 * MiB],
      ['alloc', 3, 3 * MiB],
      ['alloc', 4, 3 * MiB],
      ['alloc', 5, 3 * MiB],
      ['free', 5, 3 * MiB],
      ['free', 4, 3 * MiB],
      ['free', 3, 3 * MiB],
      ['alloc', 6, 3 * MiB],
      ['alloc', 7, 3 * MiB],
      ['free', 7, 3 * MiB],
      ['free', 6, 3 * MiB],
      ['free', 1, 12 * MiB],
      ['alloc', 8, 1024],
      ['free', 8, 1024],
      ['free', 2, 4 * MiB],
    ]),
  );

  it("leaves the program's teardown out of the step's own: the weights freed at the end stay standing state", () => {
    // the final descent under the step boundary's 16 MiB starts with the weights' free (op 12),
    // before the last allocation: a log tensor allocated in the teardown does not hide it
    expect(transientAtPeak(twoSteps)).toEqual({ bytes: 9 * MiB, standingBytes: 16 * MiB, teardownOp: 12 });
  });

  it('never says an estimate reaches the capacity: checkpointing is a bound', () => {
    const v = diagnoseOom({ header: { source: 'test' }, events: [] }, { capacityBytes: MiB, strategies: [] });
    expect(v.reductions).toEqual([]);
    const real = diagnoseOom(
      traceOf([
        ['alloc', 1, 12 * MiB],
        ['alloc', 2, 4 * MiB],
        ['alloc', 3, 3 * MiB],
        ['alloc', 4, 3 * MiB],
        ['alloc', 5, 3 * MiB],
        ['free', 5, 3 * MiB],
        ['free', 4, 3 * MiB],
        ['free', 3, 3 * MiB],
        ['free', 2, 4 * MiB],
        ['free', 1, 12 * MiB],
      ]),
      { capacityBytes: 24 * MiB, strategies: [], outside: none },
    );
    expect(real.kind).toBe('real');
    const checkpointing = real.reductions.find((r) => r.kind === 'checkpointing')!;
    // 9 MiB off would leave 16 MiB, under the capacity: still only a bound, so it does not reach
    expect(checkpointing).toMatchObject({ savedBytes: 9 * MiB, liveAfterBytes: 16 * MiB, exact: false, reaches: false });
  });
});

describe('on the corpus: bench/traces/gpt2_finetune.torch.pickle.gz', () => {
  const file = fileURLToPath(new URL('../../../bench/traces/gpt2_finetune.torch.pickle.gz', import.meta.url));

  it("at 8 GiB: checkpointing's figure leaves the weights and optimizer state, freed in the teardown, as standing state", async () => {
    const trace = await readTrace(file);
    const v = diagnoseOom(trace, { capacityBytes: 8 * 1024 * MiB, strategies: [] });
    expect(v.kind).toBe('real');
    const checkpointing = v.reductions.find((r) => r.kind === 'checkpointing')!;
    // GPT-2's 124M fp32 weights alone are 473 MiB: no checkpointing goes under them (it said 65 MiB
    // when the program's final frees counted as the step's own)
    expect(checkpointing.liveAfterBytes).toBeGreaterThan(124e6 * 4);
    expect(v.peak.transient!.standingBytes).toBeGreaterThan(124e6 * 4);
    expect(checkpointing).toMatchObject({ exact: false, reaches: false });
    expect(v.reductions.filter((r) => r.reaches).every((r) => r.exact)).toBe(true);
  });
});
