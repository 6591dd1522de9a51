/**
 * The trainer's native ops on the GPU against their CPU references, on fresh random inputs of
 * realistic sizes. Each op runs on the CPU over host memory and on the GPU over device memory,
 * from the same inputs, with every output poisoned (NaN, or -7 for integers) first so that an
 * element left unwritten shows. Tolerances, as relative L2 error ‖gpu − cpu‖ / ‖cpu‖:
 *   - elementwise ops: < 1e-5 (the GPU fuses multiply-adds; the CPU does not);
 *   - gemm, spmm and the reductions (biasGrad, the loss): < 1e-4 (another summation order);
 *   - identical bit for bit: random generators, dropout masks and outputs, relu, gather, fill,
 *     csrBuild, rowDegrees, edgeNorm, correct counts.
 * Deterministic ops also give bit-identical results on two GPU runs (all but scatterAddRows).
 * Skipped, with the reason in the title, where there is no CUDA device.
 *
 * GPUMEM_OPS_BENCH=1 adds a timing test (spmm bandwidth, gemm TFLOP/s) that prints its numbers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CudaAllocator, CudaGraph, HostAllocator, Stream, loadNative } from '@gpumem/allocator-core';
import type { NativeOps } from '../packages/gnn/src/framework/native-ops.js';
import { gpuAvailable, gpuTitle } from './gpu.js';
import { randf, randi, relL2 } from './test-data.js';

type Typed = Float32Array | Int32Array | Uint8Array | Uint16Array;
type Ctor<T extends Typed> = { new (n: number): T; BYTES_PER_ELEMENT: number };

/** Index of the first difference (Object.is: NaN equals NaN, +0 differs from -0), or -1. */
function firstDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return 0;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}
function expectIdentical(gpu: ArrayLike<number>, cpu: ArrayLike<number>, what: string): void {
  const i = firstDiff(gpu, cpu);
  if (i >= 0) throw new Error(`${what}: element ${i} differs: gpu ${gpu[i]} cpu ${cpu[i]}`);
}
function expectWritten(a: ArrayLike<number>, what: string, poison?: number): void {
  for (let i = 0; i < a.length; i++) {
    const v = a[i]!;
    if (poison === undefined ? Number.isNaN(v) : v === poison) throw new Error(`${what}: element ${i} not written`);
  }
}

describe.skipIf(!gpuAvailable)(gpuTitle('ops on the GPU against the CPU reference'), () => {
  let ops: NativeOps;
  let dev: CudaAllocator;
  let host: HostAllocator;
  const live: { a: CudaAllocator | HostAllocator; p: number; n: number }[] = [];

  beforeAll(() => {
    ops = (loadNative() as unknown as { ops: NativeOps }).ops;
    dev = new CudaAllocator();
    host = new HostAllocator();
    console.log('gemm backend:', JSON.stringify(ops.gemmBackend()));
  });
  afterAll(() => {
    for (const { a, p, n } of live.reverse()) a.free(p, n);
    dev?.dispose();
    host?.dispose();
  });

  /** The same buffer on the host (h) and on the device (d). */
  class Twin<T extends Typed> {
    readonly h: number;
    readonly d: number;
    readonly bytes: number;
    constructor(
      readonly ctor: Ctor<T>,
      readonly n: number,
    ) {
      this.bytes = Math.max(16, n * ctor.BYTES_PER_ELEMENT);
      this.h = host.malloc(this.bytes);
      this.d = dev.malloc(this.bytes);
      live.push({ a: host, p: this.h, n: this.bytes }, { a: dev, p: this.d, n: this.bytes });
    }
    set(data: Typed): this {
      if (data.length !== this.n) throw new Error('size');
      if (this.n > 0) {
        host.write(this.h, data);
        dev.write(this.d, data);
      }
      return this;
    }
    poison(): this {
      const p = new this.ctor(this.n);
      if (p instanceof Float32Array) p.fill(NaN);
      else p.fill(p instanceof Int32Array ? -7 : 7);
      return this.set(p);
    }
    cpu(): T {
      const out = new this.ctor(this.n);
      if (this.n > 0) host.read(this.h, out);
      return out;
    }
    gpu(): T {
      const out = new this.ctor(this.n);
      if (this.n > 0) dev.read(this.d, out);
      return out;
    }
  }
  const F = (data: Float32Array) => new Twin(Float32Array, data.length).set(data);
  const I = (data: Int32Array) => new Twin(Int32Array, data.length).set(data);
  const Fz = (n: number) => new Twin(Float32Array, n).poison();
  const Iz = (n: number) => new Twin(Int32Array, n).poison();

  /** A CSR graph built on the CPU from a random edge list. */
  function graph(N: number, E: number, seed: number) {
    const rows = I(randi(E, N, seed));
    const cols = I(randi(E, N, seed + 1));
    const rowptr = Iz(N + 1);
    const col = Iz(E);
    ops.csrBuild(false, 0, rows.h, cols.h, E, N, rowptr.h, col.h, 0, 0);
    const rp = rowptr.cpu();
    const c = col.cpu();
    rowptr.set(rp);
    col.set(c);
    return { rows, cols, rowptr, col, rp, c };
  }

  for (const [ta, tb] of [
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ] as const) {
    it(`gemm 257x513x129 transA=${ta} transB=${tb}: < 1e-4, beta = 0 ignores NaN, deterministic`, () => {
      const [M, N, K] = [257, 513, 129];
      const A = F(randf(M * K, 1));
      const B = F(randf(K * N, 2));
      const C0 = randf(M * N, 3);
      const C = F(C0);
      ops.gemm(false, 0, ta, tb, M, N, K, 0.5, A.h, B.h, 0.25, C.h);
      ops.gemm(true, 0, ta, tb, M, N, K, 0.5, A.d, B.d, 0.25, C.d);
      const cref = C.cpu();
      expect(relL2(C.gpu(), cref)).toBeLessThan(1e-4);
      const Z = Fz(M * N);
      ops.gemm(false, 0, ta, tb, M, N, K, 1, A.h, B.h, 0, Z.h);
      ops.gemm(true, 0, ta, tb, M, N, K, 1, A.d, B.d, 0, Z.d);
      const first = Z.gpu();
      const ref = Z.cpu();
      expectWritten(first, 'C');
      expect(relL2(first, ref)).toBeLessThan(1e-4);
      Z.poison();
      ops.gemm(true, 0, ta, tb, M, N, K, 1, A.d, B.d, 0, Z.d);
      expectIdentical(Z.gpu(), first, 'second run');
      // the tiled kernel (forced) agrees as well
      process.env.GPUMEM_GEMM = 'tiled';
      try {
        expect(ops.gemmBackend().backend).toBe('tiled');
        const T = Fz(M * N);
        ops.gemm(true, 0, ta, tb, M, N, K, 1, A.d, B.d, 0, T.d);
        const t = T.gpu();
        expectWritten(t, 'C (tiled)');
        expect(relL2(t, ref)).toBeLessThan(1e-4);
        C.set(C0);
        ops.gemm(true, 0, ta, tb, M, N, K, 0.5, A.d, B.d, 0.25, C.d);
        expect(relL2(C.gpu(), cref)).toBeLessThan(1e-4);
      } finally {
        delete process.env.GPUMEM_GEMM;
      }
    });
  }

  it('addBias (float4 and scalar paths): < 1e-5', () => {
    for (const cols of [128, 129]) {
      const rows = 1000;
      const Y = F(randf(rows * cols, 10 + cols));
      const b = F(randf(cols, 11));
      ops.addBias(false, 0, Y.h, b.h, rows, cols);
      ops.addBias(true, 0, Y.d, b.d, rows, cols);
      expect(relL2(Y.gpu(), Y.cpu())).toBeLessThan(1e-5);
    }
  });

  it('biasGrad 100003x37 and 5000x256, with and without accumulate: < 1e-4, deterministic', () => {
    for (const [rows, cols] of [
      [100_003, 37],
      [5000, 256],
      [50, 3],
    ] as const) {
      const dY = F(randf(rows * cols, 12));
      for (const acc of [false, true]) {
        const init = randf(cols, 13);
        const db = acc ? F(init) : Fz(cols);
        ops.biasGrad(false, 0, dY.h, db.h, rows, cols, acc);
        ops.biasGrad(true, 0, dY.d, db.d, rows, cols, acc);
        const g = db.gpu();
        expectWritten(g, 'dBias');
        expect(relL2(g, db.cpu())).toBeLessThan(1e-4);
        if (acc) db.set(init);
        else db.poison();
        ops.biasGrad(true, 0, dY.d, db.d, rows, cols, acc);
        expectIdentical(db.gpu(), g, 'biasGrad second run');
      }
    }
  });

  it('addBiasRelu (identical) and reluBiasGrad (mask identical, sums < 1e-4, deterministic)', () => {
    for (const [rows, cols] of [
      [64, 784],
      [5000, 37],
    ] as const) {
      const y = F(randf(rows * cols, 40 + cols));
      const bias = F(randf(cols, 41));
      ops.addBiasRelu(false, 0, y.h, bias.h, rows, cols);
      ops.addBiasRelu(true, 0, y.d, bias.d, rows, cols);
      expectIdentical(y.gpu(), y.cpu(), 'addBiasRelu');
      const dy = F(randf(rows * cols, 42 + cols));
      const db = Fz(cols);
      ops.reluBiasGrad(false, 0, y.h, dy.h, db.h, rows, cols);
      ops.reluBiasGrad(true, 0, y.d, dy.d, db.d, rows, cols);
      expectIdentical(dy.gpu(), dy.cpu(), 'reluBiasGrad mask');
      const g = db.gpu();
      expectWritten(g, 'reluBiasGrad dBias');
      expect(relL2(g, db.cpu())).toBeLessThan(1e-4);
      db.poison();
      ops.reluBiasGrad(true, 0, y.d, dy.d, db.d, rows, cols); // dy already masked: the same sums again
      expectIdentical(db.gpu(), g, 'reluBiasGrad second run');
    }
  });

  it('relu, reluBackward, dropout and dropoutBackward: identical to the CPU', () => {
    const n = 1_000_003;
    const X = F(randf(n, 20));
    const Y = Fz(n);
    ops.relu(false, 0, X.h, Y.h, n);
    ops.relu(true, 0, X.d, Y.d, n);
    expectIdentical(Y.gpu(), Y.cpu(), 'relu');
    const dY = F(randf(n, 21));
    const dX = Fz(n);
    ops.reluBackward(false, 0, Y.h, dY.h, dX.h, n);
    ops.reluBackward(true, 0, Y.d, dY.d, dX.d, n);
    expectIdentical(dX.gpu(), dX.cpu(), 'reluBackward');

    const mask = new Twin(Uint8Array, n).poison();
    const D = Fz(n);
    ops.dropout(false, 0, X.h, D.h, mask.h, n, 0.5, 2 ** 40 + 3, 777);
    ops.dropout(true, 0, X.d, D.d, mask.d, n, 0.5, 2 ** 40 + 3, 777);
    const m = mask.gpu();
    expectIdentical(m, mask.cpu(), 'dropout mask');
    expectIdentical(D.gpu(), D.cpu(), 'dropout');
    let kept = 0;
    for (const v of m) kept += v;
    expect(Math.abs(kept / n - 0.5)).toBeLessThan(0.005);
    dX.poison();
    ops.dropoutBackward(false, 0, dY.h, mask.h, dX.h, n, 0.5);
    ops.dropoutBackward(true, 0, dY.d, mask.d, dX.d, n, 0.5);
    expectIdentical(dX.gpu(), dX.cpu(), 'dropoutBackward');
  });

  for (const C of [10, 47]) {
    it(`softmaxCrossEntropy and accuracy, N = 20000, C = ${C}, all rows and a subset: < 1e-4, deterministic`, () => {
      const N = 20_000;
      const logits = F(randf(N * C, 30 + C, 5));
      const labels = I(randi(N, C, 31));
      const subset = randi(5000, N, 32); // with repeats
      for (const [rowIndex, R] of [
        [null, N],
        [I(subset), subset.length],
        [I(subset.subarray(0, 50)), 50], // one block: no second pass
        [I(new Int32Array(0)), 0],
      ] as const) {
        const d = Fz(N * C);
        const loss = Fz(1);
        const correct = Iz(1);
        const ri = rowIndex ?? { h: 0, d: 0 };
        ops.softmaxCrossEntropy(false, 0, logits.h, labels.h, ri.h, R, N, C, d.h, loss.h, correct.h);
        ops.softmaxCrossEntropy(true, 0, logits.d, labels.d, ri.d, R, N, C, d.d, loss.d, correct.d);
        const gd = d.gpu();
        const gl = loss.gpu();
        expectWritten(gd, 'dLogits');
        expect(relL2(gd, d.cpu())).toBeLessThan(1e-5);
        expect(relL2(gl, loss.cpu())).toBeLessThan(1e-4);
        expect(correct.gpu()[0]).toBe(correct.cpu()[0]);
        d.poison();
        loss.poison();
        ops.softmaxCrossEntropy(true, 0, logits.d, labels.d, ri.d, R, N, C, d.d, loss.d, correct.d);
        expectIdentical(d.gpu(), gd, 'dLogits second run');
        expectIdentical(loss.gpu(), gl, 'loss second run');
        const acc = Iz(1);
        ops.accuracy(false, 0, logits.h, labels.h, ri.h, R, N, C, acc.h);
        ops.accuracy(true, 0, logits.d, labels.d, ri.d, R, N, C, acc.d);
        expect(acc.gpu()[0]).toBe(acc.cpu()[0]);
        expect(acc.cpu()[0]).toBe(correct.cpu()[0]);
      }
    });
  }

  it('sgd and adam (3 steps) on 1M values: < 1e-5', () => {
    const n = 1_000_000;
    const W = F(randf(n, 40));
    const G = F(randf(n, 41));
    ops.sgd(false, 0, W.h, G.h, n, 0.05);
    ops.sgd(true, 0, W.d, G.d, n, 0.05);
    expect(relL2(W.gpu(), W.cpu())).toBeLessThan(1e-5);
    const M = F(new Float32Array(n));
    const V = F(new Float32Array(n));
    for (let step = 1; step <= 3; step++) {
      const g = F(randf(n, 42 + step));
      ops.adam(false, 0, W.h, g.h, M.h, V.h, n, 1e-3, 0.9, 0.999, 1e-8, step);
      ops.adam(true, 0, W.d, g.d, M.d, V.d, n, 1e-3, 0.9, 0.999, 1e-8, step);
    }
    expect(relL2(M.gpu(), M.cpu())).toBeLessThan(1e-5);
    expect(relL2(V.gpu(), V.cpu())).toBeLessThan(1e-5);
    expect(relL2(W.gpu(), W.cpu())).toBeLessThan(1e-5);
  });

  it('gatherRows (identical) and scatterAddRows (< 1e-5), H = 64 and 7, 200k edges', () => {
    const rows = 10_000;
    const E = 200_000;
    for (const H of [64, 7]) {
      const X = F(randf(rows * H, 50 + H));
      const idx = I(randi(E, rows, 51));
      const out = Fz(E * H);
      ops.gatherRows(false, 0, X.h, idx.h, out.h, E, H);
      ops.gatherRows(true, 0, X.d, idx.d, out.d, E, H);
      const g = out.gpu();
      expectWritten(g, 'gather');
      expectIdentical(g, out.cpu(), 'gatherRows');
      const acc = F(randf(rows * H, 52));
      ops.scatterAddRows(false, 0, out.h, idx.h, acc.h, E, H);
      ops.scatterAddRows(true, 0, out.d, idx.d, acc.d, E, H);
      expect(relL2(acc.gpu(), acc.cpu())).toBeLessThan(1e-5);
    }
  });

  it('spmm on a random graph of 10k nodes (200k edges), H = 64 and 13: < 1e-4, deterministic', () => {
    const N = 10_000;
    const E = 200_000;
    const g = graph(N, E, 60);
    const val = F(randf(E, 61));
    for (const H of [64, 13, 256]) {
      const X = F(randf(N * H, 62 + H));
      const out = Fz(N * H);
      ops.spmm(false, 0, g.rowptr.h, g.col.h, val.h, X.h, out.h, N, H);
      ops.spmm(true, 0, g.rowptr.d, g.col.d, val.d, X.d, out.d, N, H);
      const first = out.gpu();
      expectWritten(first, 'spmm');
      expect(relL2(first, out.cpu())).toBeLessThan(1e-4);
      out.poison();
      ops.spmm(true, 0, g.rowptr.d, g.col.d, val.d, X.d, out.d, N, H);
      expectIdentical(out.gpu(), first, 'spmm second run');
    }
  });

  it('f32ToBf16 (identical, NaN kept) and spmmBf16 on a random graph, H = 128, 13 and 4: < 1e-4, deterministic', () => {
    const N = 10_000;
    const E = 200_000;
    const g = graph(N, E, 70);
    const val = F(randf(E, 71));
    for (const H of [128, 13, 4]) {
      const x = randf(N * H, 72 + H);
      x[0] = NaN;
      x[1] = -0;
      const X = F(x);
      const X16 = new Twin(Uint16Array, N * H).poison();
      ops.f32ToBf16(false, 0, X.h, X16.h, N * H);
      ops.f32ToBf16(true, 0, X.d, X16.d, N * H);
      expectIdentical(X16.gpu(), X16.cpu(), 'f32ToBf16');
      X16.set(X16.cpu().map((v, i) => (i === 0 ? 0x3f80 : v))); // a finite value where the NaN was
      const out = Fz(N * H);
      ops.spmmBf16(false, 0, g.rowptr.h, g.col.h, val.h, X16.h, out.h, N, H);
      ops.spmmBf16(true, 0, g.rowptr.d, g.col.d, val.d, X16.d, out.d, N, H);
      const first = out.gpu();
      expectWritten(first, 'spmmBf16');
      expect(relL2(first, out.cpu())).toBeLessThan(1e-4);
      out.poison();
      ops.spmmBf16(true, 0, g.rowptr.d, g.col.d, val.d, X16.d, out.d, N, H);
      expectIdentical(out.gpu(), first, 'spmmBf16 second run');
    }
  });

  it('csrBuild (CUB radix sort), rowDegrees and edgeNorm: identical to the CPU', () => {
    for (const [N, E] of [
      [10_000, 500_000],
      [1, 100],
      [70_000, 3],
      [5, 0],
    ] as const) {
      const rows = I(randi(E, N, 70 + N));
      const cols = I(randi(E, N, 71 + N));
      const rowptr = Iz(N + 1);
      const col = Iz(E);
      const tempBytes = ops.csrBuildTempBytes(true, E, N);
      expect(ops.csrBuildTempBytes(true, E, N)).toBe(tempBytes);
      const temp = tempBytes > 0 ? dev.malloc(tempBytes) : 0;
      try {
        ops.csrBuild(false, 0, rows.h, cols.h, E, N, rowptr.h, col.h, 0, 0);
        ops.csrBuild(true, 0, rows.d, cols.d, E, N, rowptr.d, col.d, temp, tempBytes);
        expectIdentical(rowptr.gpu(), rowptr.cpu(), `rowptr (N=${N}, E=${E})`);
        expectIdentical(col.gpu(), col.cpu(), `col (N=${N}, E=${E})`);
        if (tempBytes > 0)
          expect(() => ops.csrBuild(true, 0, rows.d, cols.d, E, N, rowptr.d, col.d, temp, tempBytes - 1)).toThrow(/tempBytes/);
      } finally {
        if (temp) dev.free(temp, tempBytes);
      }
      const deg = Fz(N);
      ops.rowDegrees(false, 0, rowptr.h, N, deg.h);
      ops.rowDegrees(true, 0, rowptr.d, N, deg.d);
      expectIdentical(deg.gpu(), deg.cpu(), 'rowDegrees');
      // a degree vector with zeros and non-integers, as after adding self-loops or weights
      const dz = deg.cpu().map((d, i) => (i % 5 === 0 ? 0 : d + 0.5));
      deg.set(dz);
      for (const mode of [0, 1, 2]) {
        const val = Fz(E);
        ops.edgeNorm(false, 0, rowptr.h, col.h, N, deg.h, mode, val.h);
        ops.edgeNorm(true, 0, rowptr.d, col.d, N, deg.d, mode, val.d);
        const v = val.gpu();
        expectWritten(v, `edgeNorm mode ${mode}`);
        expectIdentical(v, val.cpu(), `edgeNorm mode ${mode}`);
      }
    }
  });

  it('edgeNormList and scaleRows: identical to the CPU', () => {
    const N = 20_000;
    const E = 300_000;
    const src = I(randi(E, N, 81));
    const dst = I(randi(E, N, 82));
    const deg = Fz(N).set(Float32Array.from(randi(N, 40, 83), (d, i) => (i % 7 === 0 ? 0 : d + 1)));
    const w = Fz(E);
    for (const mode of [0, 1, 2]) {
      w.poison();
      ops.edgeNormList(false, 0, src.h, dst.h, deg.h, E, mode, w.h);
      ops.edgeNormList(true, 0, src.d, dst.d, deg.d, E, mode, w.d);
      expectWritten(w.gpu(), `edgeNormList mode ${mode}`);
      expectIdentical(w.gpu(), w.cpu(), `edgeNormList mode ${mode}`);
    }
    for (const H of [64, 13]) {
      const x = F(randf(E * H, 84 + H));
      const out = Fz(E * H).poison();
      ops.scaleRows(false, 0, x.h, w.h, out.h, E, H);
      ops.scaleRows(true, 0, x.d, w.d, out.d, E, H);
      expectWritten(out.gpu(), `scaleRows H=${H}`);
      expectIdentical(out.gpu(), out.cpu(), `scaleRows H=${H}`);
    }
  });

  it('axpy: identical to the CPU (fmaf on both)', () => {
    const n = 1_000_003;
    const x = F(randf(n, 91));
    const y0 = randf(n, 92);
    const y = F(y0);
    ops.axpy(false, 0, -1.5, x.h, y.h, n);
    ops.axpy(true, 0, -1.5, x.d, y.d, n);
    expectIdentical(y.gpu(), y.cpu(), 'axpy');
  });

  it('randomInts, randomNormal, randomUniform: identical to the CPU bit for bit', () => {
    const n = 1_000_003;
    const seed = 2 ** 40 + 5;
    const offset = 123_456_789;
    for (const modulo of [1000, 2 ** 31, 1]) {
      const r = Iz(n);
      ops.randomInts(false, 0, r.h, n, modulo, seed, offset);
      ops.randomInts(true, 0, r.d, n, modulo, seed, offset);
      expectIdentical(r.gpu(), r.cpu(), `randomInts mod ${modulo}`);
    }
    const z = Fz(n);
    ops.randomNormal(false, 0, z.h, n, seed, offset);
    ops.randomNormal(true, 0, z.d, n, seed, offset);
    const zg = z.gpu();
    expectWritten(zg, 'randomNormal');
    expectIdentical(zg, z.cpu(), 'randomNormal');
    const u = Fz(n);
    ops.randomUniform(false, 0, u.h, n, -0.25, 0.75, seed, offset);
    ops.randomUniform(true, 0, u.d, n, -0.25, 0.75, seed, offset);
    expectIdentical(u.gpu(), u.cpu(), 'randomUniform');
  });

  it('fillF32 (also at an unaligned address), fillI32, scale', () => {
    const n = 100_003;
    const f = Fz(n + 1);
    ops.fillF32(false, 0, f.h + 4, n, 1.5);
    ops.fillF32(true, 0, f.d + 4, n, 1.5);
    const fg = f.gpu();
    expect(fg[0]).toBeNaN();
    expectIdentical(fg, f.cpu(), 'fillF32');
    const i = Iz(n);
    for (const v of [0, -9]) {
      ops.fillI32(false, 0, i.h, n, v);
      ops.fillI32(true, 0, i.d, n, v);
      expectIdentical(i.gpu(), i.cpu(), `fillI32 ${v}`);
    }
    const Y = F(randf(n, 81));
    ops.scale(false, 0, 3, Y.h, Y.h, n);
    ops.scale(true, 0, 3, Y.d, Y.d, n);
    expect(relL2(Y.gpu(), Y.cpu())).toBeLessThan(1e-5);
  });

  it('gatherBatch: the rows and labels that gatherRows gives, at the step a device counter names (identical)', () => {
    const [nRows, H, rows] = [5000, 784, 64];
    const X = F(randf(nRows * H, 70));
    const labels = I(randi(nRows, 10, 71));
    const perm = I(randi(rows * 7, nRows, 72));
    for (const stepValue of [null, 0, 3, 6]) {
      const step = stepValue === null ? { h: 0, d: 0 } : I(Int32Array.of(stepValue));
      const first = (stepValue ?? 0) * rows;
      const x = Fz(rows * H);
      const y = Iz(rows);
      ops.gatherBatch(true, 0, X.d, labels.d, perm.d, step.d, rows, H, x.d, y.d);
      const xRef = Fz(rows * H);
      const yRef = Iz(rows);
      ops.gatherRows(true, 0, X.d, perm.d + 4 * first, xRef.d, rows, H);
      ops.gatherRows(true, 0, labels.d, perm.d + 4 * first, yRef.d, rows, 1); // i32 bits through a float copy
      ops.gatherBatch(false, 0, X.h, labels.h, perm.h, step.h, rows, H, x.h, y.h);
      const gx = x.gpu();
      expectWritten(gx, 'gatherBatch x');
      expectIdentical(gx, xRef.gpu(), `gatherBatch x, step ${stepValue}`);
      expectIdentical(y.gpu(), yRef.gpu(), `gatherBatch y, step ${stepValue}`);
      expectIdentical(gx, x.cpu(), 'gatherBatch x against the CPU');
      expectIdentical(y.gpu(), y.cpu(), 'gatherBatch y against the CPU');
    }
    // H not a multiple of 4: the scalar path
    const X7 = F(randf(100 * 7, 73));
    const x7 = Fz(5 * 7);
    const y7 = Iz(5);
    const idx = I(Int32Array.of(4, 99, 0, 50, 4));
    ops.gatherBatch(true, 0, X7.d, labels.d, idx.d, 0, 5, 7, x7.d, y7.d);
    ops.gatherBatch(false, 0, X7.h, labels.h, idx.h, 0, 5, 7, x7.h, y7.h);
    expectIdentical(x7.gpu(), x7.cpu(), 'gatherBatch H = 7');
    expectIdentical(y7.gpu(), y7.cpu(), 'gatherBatch labels H = 7');
  });

  for (const [N, C] of [
    [64, 10],
    [37, 47],
    [1000, 10],
  ] as const) {
    it(`softmaxCrossEntropyBiasGrad N = ${N}, C = ${C}: bit-identical to softmaxCrossEntropy then biasGrad, loss at the counter's slot`, () => {
      const logits = F(randf(N * C, 80 + N + C, 5));
      const labels = I(randi(N, C, 81));
      const d = Fz(N * C);
      const dBias = Fz(C);
      const loss = Fz(4);
      const correct = Iz(4);
      const step = I(Int32Array.of(2));
      ops.softmaxCrossEntropyBiasGrad(true, 0, logits.d, labels.d, N, C, d.d, dBias.d, loss.d, correct.d, step.d);
      const dRef = Fz(N * C);
      const dBiasRef = Fz(C);
      const lossRef = Fz(1);
      const correctRef = Iz(1);
      ops.softmaxCrossEntropy(true, 0, logits.d, labels.d, 0, N, N, C, dRef.d, lossRef.d, correctRef.d);
      ops.biasGrad(true, 0, dRef.d, dBiasRef.d, N, C, false);
      const [gd, gb, gl, gc] = [d.gpu(), dBias.gpu(), loss.gpu(), correct.gpu()];
      expectWritten(gd, 'dLogits');
      expectWritten(gb, 'dBias');
      expectIdentical(gd, dRef.gpu(), 'dLogits');
      expectIdentical(gb, dBiasRef.gpu(), 'dBias');
      expect(Number.isNaN(gl[0]) && Number.isNaN(gl[1]) && Number.isNaN(gl[3])).toBe(true); // only slot 2 written
      expectIdentical([gl[2]!], lossRef.gpu(), 'loss');
      expect([...gc]).toEqual([-7, -7, correctRef.gpu()[0], -7]);
      // against the CPU reference, slot 0 without a counter
      ops.softmaxCrossEntropyBiasGrad(false, 0, logits.h, labels.h, N, C, d.h, dBias.h, loss.h, correct.h, 0);
      expect(relL2(gd, d.cpu())).toBeLessThan(1e-5);
      expect(relL2(gb, dBias.cpu())).toBeLessThan(1e-4);
      expect(relL2([gl[2]!], [loss.cpu()[0]!])).toBeLessThan(1e-4);
      expect(gc[2]).toBe(correct.cpu()[0]);
    });
  }

  it('addI32 and streamWait: a captured fork onto a second stream and a join, replayed as a CUDA Graph', () => {
    const n = 1 << 20;
    const main = Stream.create(dev.device);
    const side = Stream.create(dev.device);
    try {
      const counter = I(Int32Array.of(5));
      const a = F(randf(n, 90));
      const b = Fz(n);
      const c = Fz(n);
      // b = a on main; fork: side computes c = 2b and advances the counter; join; then b = 2a on main
      const ordered = () => {
        ops.scale(true, main.handle, 1, a.d, b.d, n);
        ops.streamWait(true, side.handle, main.handle);
        ops.scale(true, side.handle, 2, b.d, c.d, n);
        ops.addI32(true, side.handle, counter.d, 3);
        ops.streamWait(true, main.handle, side.handle);
        ops.scale(true, main.handle, 2, a.d, b.d, n); // after side has read b
      };
      ordered(); // eagerly
      main.synchronize();
      const twoA = a.cpu().map((v) => Math.fround(2 * v));
      expectIdentical(c.gpu(), twoA, 'c after the eager fork');
      expect(counter.gpu()[0]).toBe(8);
      c.poison();
      const graph = CudaGraph.capture(main, ordered);
      try {
        graph.launch();
        graph.launch();
        main.synchronize();
      } finally {
        graph.destroy();
      }
      expect(counter.gpu()[0]).toBe(14);
      expectIdentical(c.gpu(), twoA, 'c after two replays');
      expectIdentical(
        b.gpu(),
        a.cpu().map((v) => Math.fround(2 * v)),
        'b after two replays',
      );
      expect(() => ops.addI32(true, main.handle, counter.d, 2 ** 31)).toThrow(/value/);
    } finally {
      main.synchronize();
      side.destroy();
      main.destroy();
    }
  });

  it.skipIf(process.env.GPUMEM_OPS_BENCH !== '1')('timings (GPUMEM_OPS_BENCH=1)', () => {
    const native = loadNative() as unknown as {
      createEvent(device?: number): number;
      destroyEvent(e: number): void;
      recordEvent(e: number, stream: number): void;
      synchronizeEvent(e: number): void;
      elapsedMs(a: number, b: number): number;
    };
    const e0 = native.createEvent(0);
    const e1 = native.createEvent(0);
    const time = (reps: number, f: () => void): number => {
      f();
      native.recordEvent(e0, 0);
      for (let r = 0; r < reps; r++) f();
      native.recordEvent(e1, 0);
      native.synchronizeEvent(e1);
      return native.elapsedMs(e0, e1) / reps;
    };
    const bufs: [number, number][] = [];
    const alloc = (bytes: number) => {
      const p = dev.malloc(bytes);
      bufs.push([p, bytes]);
      return p;
    };
    try {
      // gemm
      for (const [M, N, K] of [
        [4096, 4096, 4096],
        [100_000, 256, 128],
      ] as const) {
        const A = alloc(M * K * 4);
        const B = alloc(K * N * 4);
        const C = alloc(M * N * 4);
        ops.randomNormal(true, 0, A, M * K, 1, 0);
        ops.randomNormal(true, 0, B, K * N, 2, 0);
        for (const backend of ['cublas', 'tiled']) {
          if (backend === 'tiled') process.env.GPUMEM_GEMM = 'tiled';
          const ms = time(5, () => ops.gemm(true, 0, false, false, M, N, K, 1, A, B, 0, C));
          delete process.env.GPUMEM_GEMM;
          console.log(`gemm ${M}x${N}x${K} ${backend}: ${ms.toFixed(3)} ms, ${((2 * M * N * K) / ms / 1e9).toFixed(1)} TFLOP/s`);
        }
      }
      // spmm: 1M nodes, 10M edges, H = 64
      const N = 1_000_000;
      const E = 10_000_000;
      for (const H of [64, 128]) {
        const rows = alloc(E * 4);
        const cols = alloc(E * 4);
        ops.randomInts(true, 0, rows, E, N, 5, 0);
        ops.randomInts(true, 0, cols, E, N, 6, 0);
        const rowptr = alloc((N + 1) * 4);
        const col = alloc(E * 4);
        const tb = ops.csrBuildTempBytes(true, E, N);
        const temp = alloc(tb);
        const csrMs = time(3, () => ops.csrBuild(true, 0, rows, cols, E, N, rowptr, col, temp, tb));
        const val = alloc(E * 4);
        ops.randomUniform(true, 0, val, E, 0, 1, 7, 0);
        const X = alloc(N * H * 4);
        ops.randomNormal(true, 0, X, N * H, 8, 0);
        const out = alloc(N * H * 4);
        const ms = time(5, () => ops.spmm(true, 0, rowptr, col, val, X, out, N, H));
        const bytes = E * 8 + E * H * 4 + N * H * 4 + (N + 1) * 4; // col+val, X rows per nonzero, out, rowptr
        console.log(
          `spmm N=${N} nnz=${E} H=${H}: ${ms.toFixed(3)} ms, ${(bytes / ms / 1e6).toFixed(0)} GB/s effective; csrBuild ${csrMs.toFixed(3)} ms`,
        );
        const idx = rows;
        const g = alloc(E * H * 4);
        const gms = time(5, () => ops.gatherRows(true, 0, X, idx, g, E, H));
        console.log(`gatherRows E=${E} H=${H}: ${gms.toFixed(3)} ms, ${((2 * E * H * 4) / gms / 1e6).toFixed(0)} GB/s`);
        const sms = time(3, () => ops.scatterAddRows(true, 0, g, idx, out, E, H));
        console.log(`scatterAddRows E=${E} H=${H}: ${sms.toFixed(3)} ms, ${((2 * E * H * 4) / sms / 1e6).toFixed(0)} GB/s`);
        for (const [p, b] of bufs.splice(bufs.length - 9)) dev.free(p, b);
      }
      const R = 1_000_000;
      for (const C of [16, 40, 100]) {
        const logits = alloc(R * C * 4);
        ops.randomNormal(true, 0, logits, R * C, 1, 0);
        const labels = alloc(R * 4);
        ops.randomInts(true, 0, labels, R, C, 2, 0);
        const d = alloc(R * C * 4);
        const out = alloc(8);
        const ms = time(5, () => ops.softmaxCrossEntropy(true, 0, logits, labels, 0, R, R, C, d, out, out + 4));
        console.log(`softmaxCrossEntropy R=${R} C=${C}: ${ms.toFixed(3)} ms, ${((2 * R * C * 4) / ms / 1e6).toFixed(0)} GB/s`);
        const bms = time(5, () => ops.biasGrad(true, 0, logits, d, R, C, false));
        console.log(`biasGrad ${R}x${C}: ${bms.toFixed(3)} ms, ${((R * C * 4) / bms / 1e6).toFixed(0)} GB/s`);
      }
      const n = 100_000_000;
      const big = alloc(n * 4);
      const nms = time(5, () => ops.randomNormal(true, 0, big, n, 3, 0));
      console.log(`randomNormal n=${n}: ${nms.toFixed(3)} ms, ${((n * 4) / nms / 1e6).toFixed(0)} GB/s`);
    } finally {
      for (const [p, b] of bufs) dev.free(p, b);
      native.destroyEvent(e0);
      native.destroyEvent(e1);
    }
  });
});
