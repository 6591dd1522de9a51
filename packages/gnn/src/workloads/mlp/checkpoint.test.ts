/**
 * The mlp's activation options on the CPU kernels: activation checkpointing (the same losses, bit for
 * bit), nano-batches (the same losses up to float summation order), trainer-inserted prefetch (no
 * change to the results; every prefetch names a live allocation, in the order backward needs it),
 * the bad values train() refuses, and the peak activation memory against the formula of the notes
 * (Mlp.activationFormula), measured with the allocator's peak statistics around each step.
 */
import { describe, expect, it } from 'vitest';
import { AllocatorAdaptor, HostAllocator, type Allocator, type DevicePtr, type PrefetchTarget, type Stream } from '@gpumem/allocator-core';
import { train } from '../../training/train.js';
import { Mlp } from '../../models/mlp.js';
import { Runtime } from '../../framework/runtime.js';
import { nanoBatchSlices } from './train-mlp.js';
import type { TrainOptionsBag } from '../../training/train-types.js';
import { asTrainOptions } from '../registry.js';
import type { MlpTrainOptions } from './options.js';
import { testTime } from '../../../../../tests/time-budget.js';

/** A small mlp: 8 hidden layers (9 Linear layers), 4 steps of 64 rows (the last one short). */
const small = { model: 'mlp', hidden: 48, hiddenLayers: 8, batchSize: 64, trainSubset: 250, testSubset: 100, epochs: 2, seed: 5 } as const;

const losses = (o: Partial<MlpTrainOptions>) => {
  const r = train({ ...small, allocator: 'host', ...o });
  return {
    losses: r.epochs.flatMap((e) => e.losses),
    accuracy: r.epochs.map((e) => e.accuracy),
    train: r.epochs.map((e) => e.trainAccuracy),
  };
};

describe('activation checkpointing (CPU)', () => {
  it(
    'gives the same losses and accuracies as keeping every activation, bit for bit, for every segment length',
    () => {
      const off = losses({});
      expect(off.losses).toHaveLength(8);
      for (const checkpoint of [1, 2, 3, 4, 9]) {
        const on = losses({ checkpoint });
        expect(on.losses, `checkpoint ${checkpoint}`).toEqual(off.losses);
        expect(on.accuracy).toEqual(off.accuracy);
        expect(on.train).toEqual(off.train);
      }
    },
    testTime(120_000),
  );

  it('keeps the inputs of layers 0, M, 2M, ... and of the last segment', () => {
    const allocator = new HostAllocator();
    const rt = new Runtime(allocator);
    const kept = (layers: number, m: number) => {
      const mlp = new Mlp(rt, new Array<number>(layers + 1).fill(2), 0);
      try {
        return Array.from({ length: layers }, (_, i) => i).filter((i) => mlp.keepsInput(i, m));
      } finally {
        mlp.dispose();
      }
    };
    expect(kept(9, 0)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(kept(9, 1)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(kept(9, 2)).toEqual([0, 2, 4, 6, 8]);
    expect(kept(9, 4)).toEqual([0, 4, 8]);
    expect(kept(9, 3)).toEqual([0, 3, 6, 7, 8]); // the last segment [6, 9) is not dropped: backward starts there
    expect(kept(9, 9)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(kept(8, 3)).toEqual([0, 3, 6, 7]);
    rt.dispose();
    allocator.dispose();
  });
});

describe('nano-batches (CPU)', () => {
  it('slices a batch into near-equal rows', () => {
    expect(nanoBatchSlices(64, 4)).toEqual([
      [0, 16],
      [16, 16],
      [32, 16],
      [48, 16],
    ]);
    expect(nanoBatchSlices(64, 3)).toEqual([
      [0, 22],
      [22, 21],
      [43, 21],
    ]);
    expect(nanoBatchSlices(2, 4)).toEqual([
      [0, 1],
      [1, 1],
    ]);
    expect(nanoBatchSlices(58, 1)).toEqual([[0, 58]]);
  });

  // The gradients of the slices are summed in float in another order than one product over the
  // batch (and each slice's loss gradient is scaled by rows/batch after its division by its own
  // rows), so losses differ in the last bits and the difference grows a little with each update:
  // within 5e-7 relative over these 8 steps (measured: at most 7e-8, about one f32 rounding; 7e-7
  // after 64 steps of a 128-wide mlp in 4 nano-batches).
  const tolerance = 5e-7;
  it(
    `gives the unsliced losses within ${tolerance} relative, alone and with checkpointing`,
    () => {
      const whole = losses({});
      for (const [nanoBatches, checkpoint] of [
        [2, 0],
        [3, 0],
        [4, 0],
        [64, 0],
        [4, 2],
        [3, 4],
      ] as const) {
        const sliced = losses({ nanoBatches, checkpoint });
        sliced.losses.forEach((l, i) => {
          expect(Math.abs(l - whole.losses[i]!), `nanoBatches ${nanoBatches}, checkpoint ${checkpoint}, step ${i}`).toBeLessThanOrEqual(
            tolerance * whole.losses[i]!,
          );
        });
        expect(sliced.train).toEqual(whole.train); // the correct counts are integers, summed exactly
      }
    },
    testTime(120_000),
  );
});

/** Records every prefetch, checking it names a live allocation as uvm and pool do; moves nothing. */
class PrefetchRecorder extends AllocatorAdaptor {
  readonly live = new Map<DevicePtr, number>();
  readonly calls: Array<{ ptr: DevicePtr; bytes: number; to: PrefetchTarget }> = [];
  constructor(upstream: Allocator) {
    super(upstream);
  }
  protected override doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
    const ptr = super.doMalloc(bytes, stream);
    this.live.set(ptr, bytes);
    return ptr;
  }
  protected override doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void {
    this.live.delete(ptr);
    super.doFree(ptr, bytes, stream);
  }
  protected override doPrefetch(ptr: DevicePtr, bytes: number, to: PrefetchTarget, stream: Stream | undefined): boolean {
    const size = this.live.get(ptr);
    if (size === undefined) throw new RangeError(`prefetch of ${ptr}, which is not a live allocation`);
    if (bytes > size) throw new RangeError(`prefetch of ${bytes} bytes at ${ptr}, an allocation of ${size}`);
    this.calls.push({ ptr, bytes, to });
    return super.doPrefetch(ptr, bytes, to, stream);
  }
}

describe('trainer-inserted prefetch (CPU)', () => {
  it(
    'changes no result, with or without checkpointing and nano-batches',
    () => {
      for (const o of [{}, { checkpoint: 3 }, { nanoBatches: 2, checkpoint: 2 }]) {
        expect(losses({ ...o, layerPrefetch: true })).toEqual(losses(o));
      }
    },
    testTime(120_000),
  );

  it(
    'pushes the kept inputs but the last layer’s to the host after forward and brings each back one layer ahead of backward',
    () => {
      for (const checkpoint of [0, 2]) {
        const host = new HostAllocator();
        const recorder = new PrefetchRecorder(host);
        try {
          const hidden = [40, 40, 40, 40]; // 5 layers: input 784, hidden 40, logits 10
          let stepCalls: typeof recorder.calls | undefined;
          train({
            model: 'mlp',
            allocator: recorder,
            hidden,
            batchSize: 32,
            trainSubset: 64,
            testSubset: 10,
            checkpoint,
            layerPrefetch: true,
            onStep: (s) => {
              if (s === 0) stepCalls = recorder.calls.splice(0);
            },
          });
          expect(host.prefetch(host.malloc(8), 8, 'host')).toBe(false); // the host strategy moves nothing
          const calls = stepCalls!;
          const inputBytes = (i: number) => 32 * (i === 0 ? 784 : 40) * 4;
          const toHost = calls.filter((c) => c.to === 'host');
          // kept inputs: every layer's (off), or layers 0, 2 and the last segment's 4 (checkpoint 2)
          const pushed = checkpoint === 0 ? [0, 1, 2, 3] : [0, 2];
          expect(toHost.map((c) => c.bytes)).toEqual(pushed.map(inputBytes));
          // every pushed input comes back to the device before the step ends, after it was pushed
          for (const c of toHost) {
            const back = calls.findIndex((d, k) => k > calls.indexOf(c) && d.to === 'device' && d.ptr === c.ptr);
            expect(back).toBeGreaterThan(calls.indexOf(c));
          }
          // forward: each layer's weight (a view of the ParameterSet: prefetched from its start) and input first
          expect(calls[0]!.to).toBe('device');
          expect(calls.filter((c) => c.to === 'device').length).toBeGreaterThan(3 * hidden.length);
        } finally {
          recorder.dispose();
          host.dispose();
        }
      }
    },
    testTime(60_000),
  );
});

describe('bad values of the activation options', () => {
  const host = () => new HostAllocator();
  const refuses = (o: Partial<TrainOptionsBag>, pattern: RegExp, type: new (...a: never[]) => Error = RangeError) => {
    const allocator = host();
    try {
      const run = () =>
        train(asTrainOptions({ model: 'mlp', hidden: 16, hiddenLayers: 3, batchSize: 8, trainSubset: 16, testSubset: 8, ...o, allocator }));
      expect(run).toThrow(type);
      expect(run).toThrow(pattern);
      expect(allocator.stats().allocCount).toBe(0); // refused before anything was allocated
    } finally {
      allocator.dispose();
    }
  };

  it('checkpoint: a non-negative integer up to the layers (hidden + output)', () => {
    refuses({ checkpoint: -1 }, /from 0 \(off\) to 4 \(the mlp's layers: 3 hidden and the output layer\) for checkpoint but received -1/);
    refuses({ checkpoint: 5 }, /for checkpoint but received 5/);
    refuses({ checkpoint: 1.5 }, /for checkpoint but received 1.5/);
    refuses({ checkpoint: Number.NaN }, /for checkpoint but received NaN/);
  });

  it('nanoBatches: a positive integer up to the batch size', () => {
    refuses({ nanoBatches: 0 }, /from 1 to the batch size \(8\) for nanoBatches but received 0/);
    refuses({ nanoBatches: 9 }, /for nanoBatches but received 9/);
    refuses({ nanoBatches: 2.5 }, /for nanoBatches but received 2.5/);
  });

  it('layerPrefetch: a boolean', () => {
    refuses({ layerPrefetch: 'yes' as unknown as boolean }, /boolean for layerPrefetch/, TypeError);
  });

  it('with cudaGraph: nanoBatches and layerPrefetch are refused naming them', () => {
    refuses({ cudaGraph: true, nanoBatches: 2 }, /nanoBatches 1 with cudaGraph but received 2/);
    refuses({ cudaGraph: true, layerPrefetch: true }, /layerPrefetch off with cudaGraph/);
  });

  it('the gcn refuses the mlp-only options', () => {
    for (const [o, pattern] of [
      [{ checkpoint: 1 }, /'checkpoint' applies to the mlp only/],
      [{ nanoBatches: 2 }, /'nanoBatches' applies to the mlp only/],
    ] as const) {
      const allocator = host();
      try {
        expect(() => train(asTrainOptions({ model: 'gcn', nodes: 100, ...o, allocator }))).toThrow(pattern);
        expect(allocator.stats().allocCount).toBe(0);
      } finally {
        allocator.dispose();
      }
    }
  });
});

describe('peak activation memory against the formula (CPU, host allocator)', () => {
  // 8 hidden layers of 784 (the inputs' width, so every layer's input is X bytes): N = 9 Linear
  // layers. The activation peak of a step is its peak allocated bytes less the bytes allocated
  // before it (parameters, gradients, dataset, the epoch's order and loss slots; the CPU kernels
  // need no workspace), read from the allocator around each step.
  const hiddenLayers = 8;
  const width = 784;
  const batch = 64;
  const rows: Array<{ config: string; formula: number; measured: number; ratio: number }> = [];

  const measure = (checkpoint: number, nanoBatches: number): number => {
    const allocator = new HostAllocator();
    try {
      const peaks: number[] = [];
      let before = 0;
      train({
        model: 'mlp',
        allocator,
        hidden: width,
        hiddenLayers,
        batchSize: batch,
        trainSubset: 3 * batch,
        testSubset: 10,
        checkpoint,
        nanoBatches,
        onStep: (s, stats) => {
          if (s > 0) peaks.push(stats.peakAllocatedBytes - before);
          before = stats.allocatedBytes; // what the next step starts from (the step freed all of its own)
          allocator.resetPeak();
        },
      });
      expect(new Set(peaks).size).toBe(1); // every step has the same peak
      return peaks[0]!;
    } finally {
      allocator.dispose();
    }
  };

  const configs: Array<[number, number]> = [0, 1, 2, 4].flatMap((c) => [1, 2, 4].map((k): [number, number] => [c, k]));
  configs.push([3, 1], [9, 1]); // ⌈N/M⌉ with a short last segment, and one segment of all N layers
  for (const [checkpoint, nanoBatches] of configs) {
    it(
      `checkpoint ${checkpoint || 'off'}, ${nanoBatches} nano-batch${nanoBatches > 1 ? 'es' : ''}: within 5% of the formula`,
      () => {
        const f = Mlp.activationFormula({ rows: Math.ceil(batch / nanoBatches), width, layers: hiddenLayers + 1, checkpoint });
        const measured = measure(checkpoint, nanoBatches);
        rows.push({
          config: `checkpoint ${checkpoint || 'off'}, nano ${nanoBatches}`,
          formula: f.total,
          measured,
          ratio: measured / f.total,
        });
        expect(measured / f.total).toBeGreaterThan(0.95);
        expect(measured / f.total).toBeLessThan(1.05);
      },
      testTime(60_000),
    );
  }

  it('prints the table (X = rows·784·4 bytes, Y = 0, plus 2X for the backward gradient pair)', () => {
    const table = ['| config | formula bytes | measured bytes | measured / formula |', '|---|---:|---:|---:|'];
    for (const r of rows) table.push(`| ${r.config} | ${r.formula} | ${r.measured} | ${r.ratio.toFixed(4)} |`);
    console.log(table.join('\n'));
    expect(rows.length).toBe(configs.length);
    // nano-batches scale the peak by 1/k; checkpointing every 2 or 4 layers cuts it from 11X to 8X
    const at = (c: string) => rows.find((r) => r.config === c)!.measured;
    expect(at('checkpoint off, nano 2') / at('checkpoint off, nano 1')).toBeCloseTo(0.5, 2);
    expect(at('checkpoint off, nano 4') / at('checkpoint off, nano 1')).toBeCloseTo(0.25, 2);
    expect(at('checkpoint 2, nano 1') / at('checkpoint off, nano 1')).toBeCloseTo(8 / 11, 2);
  });
});
