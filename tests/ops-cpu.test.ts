/**
 * The trainer's native ops on the CPU (onDevice = false), against hand-computed values or float64
 * references computed here in JavaScript, on small random inputs. Runs everywhere (no GPU needed).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { HostAllocator, hasCudaDevice, loadNative } from '@gpumem/allocator-core';
import type { NativeOps } from '../packages/gnn/src/framework/native-ops.js';
import { Runtime } from '../packages/gnn/src/framework/runtime.js';
import { Mlp } from '../packages/gnn/src/models/mlp.js';
import { SGD, softmaxCrossEntropyBiasGrad } from '../packages/gnn/src/framework/nn.js';
import { randf, randi, relL2 } from './test-data.js';

const ops = (loadNative() as unknown as { ops: NativeOps }).ops;
const alloc = new HostAllocator();
const live: [number, number][] = [];

afterAll(() => {
  for (const [p, n] of live) alloc.free(p, n);
  alloc.dispose();
});

function malloc(bytes: number): number {
  const n = Math.max(4, bytes);
  const p = alloc.malloc(n);
  live.push([p, n]);
  return p;
}
function put(data: Float32Array | Int32Array | Uint8Array): number {
  const p = malloc(data.byteLength);
  if (data.byteLength > 0) alloc.write(p, data);
  return p;
}
const f32 = (data: ArrayLike<number>) => put(Float32Array.from(data));
const i32 = (data: ArrayLike<number>) => put(Int32Array.from(data));
function nanF32(n: number): number {
  return f32(new Float32Array(n).fill(NaN));
}
function readF32(p: number, n: number): Float32Array {
  const out = new Float32Array(n);
  if (n > 0) alloc.read(p, out);
  return out;
}
function readI32(p: number, n: number): Int32Array {
  const out = new Int32Array(n);
  if (n > 0) alloc.read(p, out);
  return out;
}
function readU8(p: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  if (n > 0) alloc.read(p, out);
  return out;
}

/** Element-wise identity (faster than toEqual on large typed arrays). */
function same(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}
function expectAllFinite(a: ArrayLike<number>): void {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i]!)) throw new Error(`element ${i} is ${a[i]}`);
}

describe('ops (CPU): matrix product and bias', () => {
  function gemmRef(
    ta: boolean,
    tb: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: Float32Array,
    B: Float32Array,
    beta: number,
    C: Float32Array,
  ): Float64Array {
    const out = new Float64Array(M * N);
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += (ta ? A[k * M + i]! : A[i * K + k]!) * (tb ? B[j * K + k]! : B[k * N + j]!);
        out[i * N + j] = alpha * s + (beta === 0 ? 0 : beta * C[i * N + j]!);
      }
    return out;
  }

  for (const [ta, tb] of [
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ] as const) {
    it(`gemm transA=${ta} transB=${tb} against a float64 product`, () => {
      for (const [M, N, K] of [
        [13, 17, 19],
        [70, 300, 261],
        [1, 5, 1],
      ] as const) {
        const A = randf(M * K, 1 + M, 1);
        const B = randf(K * N, 2 + N, 1);
        const C0 = randf(M * N, 3 + K, 1);
        const pa = f32(A);
        const pb = f32(B);
        const pc = f32(C0);
        ops.gemm(false, 0, ta, tb, M, N, K, 0.7, pa, pb, 0.3, pc);
        const got = readF32(pc, M * N);
        expect(relL2(got, gemmRef(ta, tb, M, N, K, 0.7, A, B, 0.3, C0))).toBeLessThan(1e-6);
        // beta = 0: C is not read (NaN poison does not leak)
        const pn = nanF32(M * N);
        ops.gemm(false, 0, ta, tb, M, N, K, 1, pa, pb, 0, pn);
        const got0 = readF32(pn, M * N);
        expectAllFinite(got0);
        expect(relL2(got0, gemmRef(ta, tb, M, N, K, 1, A, B, 0, C0))).toBeLessThan(1e-6);
      }
    });
  }

  it('gemm: a hand-computed 2x2 product, K = 0 scales C, empty sizes do nothing', () => {
    const pa = f32([1, 2, 3, 4]);
    const pb = f32([5, 6, 7, 8]);
    const pc = f32([1, 1, 1, 1]);
    ops.gemm(false, 0, false, false, 2, 2, 2, 1, pa, pb, 1, pc);
    expect(Array.from(readF32(pc, 4))).toEqual([20, 23, 44, 51]);
    ops.gemm(false, 0, false, false, 2, 2, 0, 1, 0, 0, 0.5, pc);
    expect(Array.from(readF32(pc, 4))).toEqual([10, 11.5, 22, 25.5]);
    ops.gemm(false, 0, false, false, 0, 2, 2, 1, pa, pb, 0, pc);
    expect(Array.from(readF32(pc, 4))).toEqual([10, 11.5, 22, 25.5]);
  });

  it('addBias adds the bias to every row', () => {
    const rows = 5;
    const cols = 7;
    const Y = randf(rows * cols, 11);
    const b = randf(cols, 12);
    const py = f32(Y);
    ops.addBias(false, 0, py, f32(b), rows, cols);
    const got = readF32(py, rows * cols);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) expect(got[r * cols + c]).toBe(Math.fround(Y[r * cols + c]! + b[c]!));
  });

  it('biasGrad sums the columns, and accumulates on request', () => {
    const rows = 300;
    const cols = 9;
    const dY = randf(rows * cols, 13);
    const ref = new Float64Array(cols);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) ref[c] = ref[c]! + dY[r * cols + c]!;
    const pd = nanF32(cols);
    ops.biasGrad(false, 0, f32(dY), pd, rows, cols, false);
    expect(relL2(readF32(pd, cols), ref)).toBeLessThan(1e-6);
    ops.biasGrad(false, 0, f32(dY), pd, rows, cols, true);
    expect(
      relL2(
        readF32(pd, cols),
        ref.map((v) => 2 * v),
      ),
    ).toBeLessThan(1e-6);
    ops.biasGrad(false, 0, 0, pd, 0, cols, false);
    expect(Array.from(readF32(pd, cols))).toEqual(new Array(cols).fill(0));
  });
});

describe('ops (CPU): bias and ReLU fused', () => {
  it('addBiasRelu is addBias then relu, and reluBiasGrad is reluBackward then biasGrad', () => {
    const rows = 70;
    const cols = 12;
    const y0 = randf(rows * cols, 31);
    const bias = randf(cols, 32);
    const fused = f32(y0);
    ops.addBiasRelu(false, 0, fused, f32(bias), rows, cols);
    const apart = f32(y0);
    ops.addBias(false, 0, apart, f32(bias), rows, cols);
    ops.relu(false, 0, apart, apart, rows * cols);
    const y = readF32(fused, rows * cols);
    expect(same(y, readF32(apart, rows * cols))).toBe(true);
    expect(y.some((v) => v === 0) && y.some((v) => v > 0)).toBe(true);

    const dy = randf(rows * cols, 33);
    const dFused = f32(dy);
    const dbFused = nanF32(cols);
    ops.reluBiasGrad(false, 0, fused, dFused, dbFused, rows, cols);
    const dApart = f32(dy);
    const dbApart = nanF32(cols);
    ops.reluBackward(false, 0, fused, dApart, dApart, rows * cols);
    ops.biasGrad(false, 0, dApart, dbApart, rows, cols, false);
    expect(same(readF32(dFused, rows * cols), readF32(dApart, rows * cols))).toBe(true);
    expect(same(readF32(dbFused, cols), readF32(dbApart, cols))).toBe(true);
  });
});

describe('ops (CPU): activations and dropout', () => {
  it('relu and reluBackward, also in place', () => {
    const X = Float32Array.from([-2, -0, 0, 0.5, 3, -1e-30]);
    const py = nanF32(6);
    ops.relu(false, 0, f32(X), py, 6);
    expect(Array.from(readF32(py, 6))).toEqual([0, 0, 0, 0.5, 3, 0]);
    const pd = f32([1, 2, 3, 4, 5, 6]);
    ops.reluBackward(false, 0, py, pd, pd, 6);
    expect(Array.from(readF32(pd, 6))).toEqual([0, 0, 0, 4, 5, 0]);
    const px = f32(X);
    ops.relu(false, 0, px, px, 6);
    expect(Array.from(readF32(px, 6))).toEqual([0, 0, 0, 0.5, 3, 0]);
  });

  it('dropout keeps about 1-p, scales by 1/(1-p), reuses its mask in backward, is deterministic', () => {
    const n = 100_000;
    const p = 0.3;
    const X = randf(n, 21);
    const px = f32(X);
    const py = nanF32(n);
    const pm = malloc(n);
    ops.dropout(false, 0, px, py, pm, n, p, 1234, 0);
    const Y = readF32(py, n);
    const mask = readU8(pm, n);
    const scale = Math.fround(1 / (1 - p));
    let kept = 0;
    for (let i = 0; i < n; i++) {
      if (mask[i] !== 0 && mask[i] !== 1) throw new Error(`mask[${i}] = ${mask[i]}`);
      kept += mask[i]!;
      if (Y[i] !== (mask[i] ? Math.fround(X[i]! * scale) : 0)) throw new Error(`Y[${i}] = ${Y[i]}`);
    }
    expect(Math.abs(kept / n - (1 - p))).toBeLessThan(0.01);
    // backward: exactly the same mask and scale
    const dY = randf(n, 22);
    const pdx = nanF32(n);
    ops.dropoutBackward(false, 0, f32(dY), pm, pdx, n, p);
    const dX = readF32(pdx, n);
    for (let i = 0; i < n; i++) if (dX[i] !== (mask[i] ? Math.fround(dY[i]! * scale) : 0)) throw new Error(`dX[${i}] = ${dX[i]}`);
    // same seed and offset: the same mask; another seed: another; an offset shifts the stream
    const pm2 = malloc(n);
    ops.dropout(false, 0, px, py, pm2, n, p, 1234, 0);
    expect(same(readU8(pm2, n), mask)).toBe(true);
    ops.dropout(false, 0, px, py, pm2, n, p, 1235, 0);
    expect(same(readU8(pm2, n), mask)).toBe(false);
    ops.dropout(false, 0, px, py, pm2, 1000, p, 1234, 500);
    expect(same(readU8(pm2, 1000), mask.subarray(500, 1500))).toBe(true);
    // p = 0 keeps everything unchanged
    ops.dropout(false, 0, px, py, pm2, n, 0, 7, 0);
    expect(same(readF32(py, n), X)).toBe(true);
  });

  it('dropout rejects p outside [0, 1)', () => {
    const p = malloc(16);
    for (const bad of [1, 1.5, -0.1, NaN])
      expect(() => ops.dropout(false, 0, p, p, p, 4, bad, 0, 0)).toThrow(/Expected a number in \[0, 1\) for p but received/);
    expect(() => ops.dropoutBackward(false, 0, p, p, p, 4, 1)).toThrow(RangeError);
  });
});

describe('ops (CPU): softmax cross-entropy and accuracy', () => {
  function ceRef(logits: Float32Array, labels: Int32Array, rows: number[], N: number, C: number) {
    const R = rows.length;
    const d = new Float64Array(N * C);
    let loss = 0;
    let correct = 0;
    for (const row of rows) {
      const x = Array.from(logits.subarray(row * C, row * C + C));
      const m = Math.max(...x);
      const s = x.reduce((acc, v) => acc + Math.exp(v - m), 0);
      const label = labels[row]!;
      loss += Math.log(s) + m - x[label]!;
      const best = x.indexOf(m);
      if (best === label) correct++;
      for (let j = 0; j < C; j++) d[row * C + j] = (Math.exp(x[j]! - m) / s - (j === label ? 1 : 0)) / R;
    }
    return { d, loss: loss / R, correct };
  }

  for (const C of [7, 45]) {
    it(`softmaxCrossEntropy over all rows and over a row subset (C = ${C})`, () => {
      const N = 60;
      const logits = randf(N * C, 31 + C, 4);
      const labels = randi(N, C, 32);
      // make some rows correct for sure
      for (let r = 0; r < N; r += 3) logits[r * C + labels[r]!] = 10;
      const pl = f32(logits);
      const plab = i32(labels);
      const pd = nanF32(N * C);
      const ploss = nanF32(1);
      const pc = i32([-1]);
      ops.softmaxCrossEntropy(false, 0, pl, plab, 0, N, N, C, pd, ploss, pc);
      const all = ceRef(
        logits,
        labels,
        Array.from({ length: N }, (_, i) => i),
        N,
        C,
      );
      expect(Math.abs(readF32(ploss, 1)[0]! - all.loss) / all.loss).toBeLessThan(1e-5);
      expect(readI32(pc, 1)[0]).toBe(all.correct);
      expect(relL2(readF32(pd, N * C), all.d)).toBeLessThan(1e-5);

      const subset = [5, 0, 17, 33, 34, 59, 2, 21, 40];
      const pd2 = nanF32(N * C);
      ops.softmaxCrossEntropy(false, 0, pl, plab, i32(subset), subset.length, N, C, pd2, ploss, pc);
      const sub = ceRef(logits, labels, subset, N, C);
      expect(Math.abs(readF32(ploss, 1)[0]! - sub.loss) / sub.loss).toBeLessThan(1e-5);
      expect(readI32(pc, 1)[0]).toBe(sub.correct);
      const d2 = readF32(pd2, N * C);
      expect(relL2(d2, sub.d)).toBeLessThan(1e-5);
      for (let r = 0; r < N; r++) if (!subset.includes(r)) for (let j = 0; j < C; j++) expect(d2[r * C + j]).toBe(0);
      // the gradient of each listed row sums to 0
      for (const r of subset) {
        let s = 0;
        for (let j = 0; j < C; j++) s += d2[r * C + j]!;
        expect(Math.abs(s)).toBeLessThan(1e-6);
      }

      const pacc = i32([-1]);
      ops.accuracy(false, 0, pl, plab, 0, N, N, C, pacc);
      expect(readI32(pacc, 1)[0]).toBe(all.correct);
      ops.accuracy(false, 0, pl, plab, i32(subset), subset.length, N, C, pacc);
      expect(readI32(pacc, 1)[0]).toBe(sub.correct);
    });
  }

  it('softmaxCrossEntropy: hand-computed values, a bad label gives NaN, R = 0 gives 0', () => {
    // two classes, logits (0, ln 3): softmax (1/4, 3/4)
    const pl = f32([0, Math.log(3)]);
    const pd = nanF32(2);
    const ploss = nanF32(1);
    const pc = i32([-1]);
    ops.softmaxCrossEntropy(false, 0, pl, i32([0]), 0, 1, 1, 2, pd, ploss, pc);
    expect(readF32(ploss, 1)[0]).toBeCloseTo(Math.log(4), 6);
    expect(readI32(pc, 1)[0]).toBe(0);
    const d = readF32(pd, 2);
    expect(d[0]).toBeCloseTo(-0.75, 6);
    expect(d[1]).toBeCloseTo(0.75, 6);
    ops.softmaxCrossEntropy(false, 0, pl, i32([5]), 0, 1, 1, 2, pd, ploss, pc);
    expect(readF32(ploss, 1)[0]).toBeNaN();
    ops.softmaxCrossEntropy(false, 0, pl, i32([1]), i32([]), 0, 1, 2, pd, ploss, pc);
    expect(readF32(ploss, 1)[0]).toBe(0);
    expect(readI32(pc, 1)[0]).toBe(0);
    expect(Array.from(readF32(pd, 2))).toEqual([0, 0]);
    expect(() => ops.softmaxCrossEntropy(false, 0, pl, i32([0]), 0, 2, 1, 2, pd, ploss, pc)).toThrow(
      /Expected R equal to N \(1\) without rowIndex for R but received 2/,
    );
  });

  it("softmaxCrossEntropyBiasGrad: the loss, then the column sums of dLogits; results at the step counter's slot", () => {
    const [N, C] = [50, 10];
    const logits = randf(N * C, 41, 4);
    const labels = randi(N, C, 42);
    const pl = f32(logits);
    const plab = i32(labels);
    const pd = nanF32(N * C);
    const pdb = nanF32(C);
    const ploss = nanF32(3);
    const pc = i32([-1, -1, -1]);
    ops.softmaxCrossEntropyBiasGrad(false, 0, pl, plab, N, C, pd, pdb, ploss, pc, i32([1]));
    const pdRef = nanF32(N * C);
    const pdbRef = nanF32(C);
    const plossRef = nanF32(1);
    const pcRef = i32([-1]);
    ops.softmaxCrossEntropy(false, 0, pl, plab, 0, N, N, C, pdRef, plossRef, pcRef);
    ops.biasGrad(false, 0, pdRef, pdbRef, N, C, false);
    expect(same(readF32(pd, N * C), readF32(pdRef, N * C))).toBe(true);
    expect(same(readF32(pdb, C), readF32(pdbRef, C))).toBe(true);
    const loss = readF32(ploss, 3);
    expect(Number.isNaN(loss[0]) && Number.isNaN(loss[2])).toBe(true);
    expect(loss[1]).toBe(readF32(plossRef, 1)[0]);
    expect(Array.from(readI32(pc, 3))).toEqual([-1, readI32(pcRef, 1)[0], -1]);
    const d = readF32(pd, N * C);
    for (let j = 0; j < C; j++) {
      let col = 0;
      for (let r = 0; r < N; r++) col += d[r * C + j]!;
      expect(readF32(pdb, C)[j]).toBeCloseTo(col, 6);
    }
    ops.softmaxCrossEntropyBiasGrad(false, 0, pl, plab, N, C, pd, pdb, ploss, pc, 0); // no counter: slot 0
    expect(readF32(ploss, 1)[0]).toBe(readF32(plossRef, 1)[0]);
    expect(() => ops.softmaxCrossEntropyBiasGrad(false, 0, pl, plab, 0, C, pd, pdb, ploss, pc, 0)).toThrow(
      /Expected integer >= 1 for N but received 0/,
    );
    expect(() => ops.softmaxCrossEntropyBiasGrad(false, 0, pl, plab, N, C, pd, 0, ploss, pc, 0)).toThrow(/dBias/);
    expect(() => ops.softmaxCrossEntropyBiasGrad(false, 0, pl, plab, N, C, pd, pdb, ploss, pc, i32([-2]))).toThrow(/step/);
  });

  it('accuracy counts ties as the first maximum', () => {
    const pl = f32([1, 1, 0, 0, 2, 2]);
    const pc = i32([-1]);
    ops.accuracy(false, 0, pl, i32([0, 1, 0]), 0, 3, 3, 2, pc);
    expect(readI32(pc, 1)[0]).toBe(2); // every row ties, so class 0 wins: rows 0 and 2 are right, row 1 not
  });
});

describe('ops (CPU): optimisers', () => {
  it('sgd: W -= lr * G', () => {
    const W = randf(100, 41);
    const G = randf(100, 42);
    const pw = f32(W);
    ops.sgd(false, 0, pw, f32(G), 100, 0.1);
    const got = readF32(pw, 100);
    const lr = Math.fround(0.1);
    for (let i = 0; i < 100; i++) expect(got[i]).toBe(Math.fround(W[i]! - Math.fround(lr * G[i]!)));
  });

  it('adam: three steps against PyTorch-form float64 reference', () => {
    const n = 257;
    // the op takes f32 hyperparameters: the reference uses the same (rounded) values
    const lr = Math.fround(0.01);
    const b1 = Math.fround(0.9);
    const b2 = Math.fround(0.999);
    const eps = Math.fround(1e-8);
    const W = Float64Array.from(randf(n, 43));
    const M = new Float64Array(n);
    const V = new Float64Array(n);
    const pw = f32(W);
    const pm = f32(M);
    const pv = f32(V);
    for (let step = 1; step <= 3; step++) {
      const G = randf(n, 44 + step);
      ops.adam(false, 0, pw, f32(G), pm, pv, n, lr, b1, b2, eps, step);
      const bc1 = 1 - b1 ** step;
      const bc2 = 1 - b2 ** step;
      for (let i = 0; i < n; i++) {
        M[i] = b1 * M[i]! + (1 - b1) * G[i]!;
        V[i] = b2 * V[i]! + (1 - b2) * G[i]! * G[i]!;
        W[i] = W[i]! - (lr / bc1) * (M[i]! / (Math.sqrt(V[i]!) / Math.sqrt(bc2) + eps));
      }
      expect(relL2(readF32(pm, n), M)).toBeLessThan(1e-5);
      expect(relL2(readF32(pv, n), V)).toBeLessThan(1e-5);
      expect(relL2(readF32(pw, n), W)).toBeLessThan(1e-5);
    }
    expect(() => ops.adam(false, 0, pw, pw, pm, pv, n, lr, b1, b2, eps, 0)).toThrow(/step/);
  });
});

describe('ops (CPU): graph ops', () => {
  it('gatherRows copies rows; scatterAddRows adds them back (index_add, with repeats)', () => {
    const rows = 10;
    const H = 6;
    const E = 25;
    const X = randf(rows * H, 51);
    const idx = randi(E, rows, 52);
    const px = f32(X);
    const pi = i32(idx);
    const pout = nanF32(E * H);
    ops.gatherRows(false, 0, px, pi, pout, E, H);
    const g = readF32(pout, E * H);
    for (let e = 0; e < E; e++) for (let h = 0; h < H; h++) expect(g[e * H + h]).toBe(X[idx[e]! * H + h]);
    const base = randf(rows * H, 53);
    const ps = f32(base);
    ops.scatterAddRows(false, 0, pout, pi, ps, E, H);
    const ref = Float64Array.from(base);
    for (let e = 0; e < E; e++)
      for (let h = 0; h < H; h++) {
        const k = idx[e]! * H + h;
        ref[k] = ref[k]! + g[e * H + h]!;
      }
    expect(relL2(readF32(ps, rows * H), ref)).toBeLessThan(1e-6);
    expect(() => ops.gatherRows(false, 0, px, i32([0, -1]), pout, 2, H)).toThrow(/index\[1\]/);
  });

  it('gatherBatch: rows and labels of a batch, from the step a counter names', () => {
    const [rows, H, batch] = [12, 5, 4];
    const X = randf(rows * H, 54);
    const labels = randi(rows, 10, 55);
    const perm = randi(3 * batch, rows, 56);
    const px = f32(X);
    const plab = i32(labels);
    const pperm = i32(perm);
    for (const step of [null, 0, 2]) {
      const xOut = nanF32(batch * H);
      const yOut = i32(new Array(batch).fill(-9));
      ops.gatherBatch(false, 0, px, plab, pperm, step === null ? 0 : i32([step]), batch, H, xOut, yOut);
      const g = readF32(xOut, batch * H);
      const y = readI32(yOut, batch);
      for (let r = 0; r < batch; r++) {
        const i = perm[(step ?? 0) * batch + r]!;
        expect(y[r]).toBe(labels[i]);
        for (let h = 0; h < H; h++) expect(g[r * H + h]).toBe(X[i * H + h]);
      }
    }
    const out = nanF32(batch * H);
    const yOut = i32(new Array(batch).fill(0));
    expect(() => ops.gatherBatch(false, 0, px, plab, i32([0, 1, -3, 2]), 0, batch, H, out, yOut)).toThrow(/index\[2\]/);
    expect(() => ops.gatherBatch(false, 0, px, plab, pperm, i32([-1]), batch, H, out, yOut)).toThrow(/step/);
    expect(() => ops.gatherBatch(false, 0, px, plab, pperm, 0, batch, H, out, 0)).toThrow(/yOut/);
  });

  function randomEdges(N: number, E: number, seed: number) {
    return { rows: randi(E, N, seed), cols: randi(E, N, seed + 1) };
  }
  function csrRef(rows: Int32Array, cols: Int32Array, N: number) {
    const rowptr = new Int32Array(N + 1);
    for (const r of rows) rowptr[r + 1] = rowptr[r + 1]! + 1;
    for (let i = 0; i < N; i++) rowptr[i + 1] = rowptr[i + 1]! + rowptr[i]!;
    const col: number[] = [];
    for (let i = 0; i < N; i++) for (let e = 0; e < rows.length; e++) if (rows[e] === i) col.push(cols[e]!);
    return { rowptr, col: Int32Array.from(col) };
  }

  it('csrBuild: a stable sort by row and its rowptr', () => {
    const N = 37;
    const E = 400;
    const { rows, cols } = randomEdges(N, E, 61);
    expect(ops.csrBuildTempBytes(false, E, N)).toBe(0);
    const prp = i32(new Int32Array(N + 1).fill(-7));
    const pcol = i32(new Int32Array(E).fill(-7));
    ops.csrBuild(false, 0, i32(rows), i32(cols), E, N, prp, pcol, 0, 0);
    const ref = csrRef(rows, cols, N);
    expect(readI32(prp, N + 1)).toEqual(ref.rowptr);
    expect(readI32(pcol, E)).toEqual(ref.col);
    // no edges; and a row out of range is an error, not a crash
    ops.csrBuild(false, 0, 0, 0, 0, 4, prp, 0, 0, 0);
    expect(Array.from(readI32(prp, 5))).toEqual([0, 0, 0, 0, 0]);
    expect(() => ops.csrBuild(false, 0, i32([0, 4]), i32([1, 1]), 2, 4, prp, pcol, 0, 0)).toThrow(
      'Expected a valid index for rows[1] but received 4',
    );
  });

  it('spmm equals the dense product; rowDegrees and edgeNorm in every mode', () => {
    const N = 40;
    const E = 300;
    const H = 5;
    const { rows, cols } = randomEdges(N, E, 71);
    const { rowptr, col } = csrRef(rows, cols, N);
    const val = randf(E, 72);
    const X = randf(N * H, 73);
    const pout = nanF32(N * H);
    const prp = i32(rowptr);
    const pcol = i32(col);
    ops.spmm(false, 0, prp, pcol, f32(val), f32(X), pout, N, H);
    const dense = new Float64Array(N * N);
    for (let i = 0; i < N; i++)
      for (let e = rowptr[i]!; e < rowptr[i + 1]!; e++) {
        const k = i * N + col[e]!;
        dense[k] = dense[k]! + val[e]!;
      }
    const ref = new Float64Array(N * H);
    for (let i = 0; i < N; i++)
      for (let k = 0; k < N; k++) for (let h = 0; h < H; h++) ref[i * H + h] = ref[i * H + h]! + dense[i * N + k]! * X[k * H + h]!;
    expect(relL2(readF32(pout, N * H), ref)).toBeLessThan(1e-6);

    const pdeg = nanF32(N);
    ops.rowDegrees(false, 0, prp, N, pdeg);
    const deg = readF32(pdeg, N);
    for (let i = 0; i < N; i++) expect(deg[i]).toBe(rowptr[i + 1]! - rowptr[i]!);
    // use a degree vector with zeros in it
    const degz = Float32Array.from(deg, (d, i) => (i % 7 === 3 ? 0 : d));
    const pdz = f32(degz);
    for (const mode of [0, 1, 2]) {
      const pval = nanF32(E);
      ops.edgeNorm(false, 0, prp, pcol, N, pdz, mode, pval);
      const got = readF32(pval, E);
      for (let i = 0; i < N; i++)
        for (let e = rowptr[i]!; e < rowptr[i + 1]!; e++) {
          const dr = degz[i]!;
          const dc = degz[col[e]!]!;
          let want: number;
          if (mode === 0) {
            const p = Math.fround(dr * dc);
            want = p === 0 ? 0 : Math.fround(1 / Math.fround(Math.sqrt(p)));
          } else {
            const d = mode === 1 ? dr : dc;
            want = d === 0 ? 0 : Math.fround(1 / d);
          }
          expect(got[e]).toBe(want);
        }
    }
    expect(() => ops.edgeNorm(false, 0, prp, pcol, N, pdz, 3, pcol)).toThrow(/mode/);
  });
});

describe('ops (CPU): random generators', () => {
  // The documented generator, in BigInt: bits = splitmix64 output for (seed, offset + i).
  const mask64 = (1n << 64n) - 1n;
  const golden = 0x9e3779b97f4a7c15n;
  function mix(z: bigint): bigint {
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask64;
    return z ^ (z >> 31n);
  }
  function bits(seed: number, counter: number): bigint {
    const key = mix((BigInt(seed) + golden) & mask64);
    return mix((key + (BigInt(counter) + 1n) * golden) & mask64);
  }

  it('randomInts is the documented counter-based hash modulo m, deterministic, in range', () => {
    const n = 50_000;
    const m = 10;
    const p = malloc(n * 4);
    ops.randomInts(false, 0, p, n, m, 42, 7);
    const a = readI32(p, n);
    for (let i = 0; i < 20; i++) expect(a[i]).toBe(Number(bits(42, 7 + i) % 10n));
    const counts = new Array(m).fill(0);
    for (const v of a) counts[v]++;
    for (const c of counts) expect(Math.abs(c / n - 0.1)).toBeLessThan(0.01);
    ops.randomInts(false, 0, p, n, m, 42, 7);
    expect(same(readI32(p, n), a)).toBe(true);
    ops.randomInts(false, 0, p, 100, 2 ** 31, 1, 0);
    for (const v of readI32(p, 100)) expect(v).toBeGreaterThanOrEqual(0);
    expect(() => ops.randomInts(false, 0, p, 4, 0, 1, 0)).toThrow(/modulo/);
    expect(() => ops.randomInts(false, 0, p, 4, 2 ** 31 + 1, 1, 0)).toThrow(/modulo/);
  });

  it('randomNormal: moments of a standard normal, deterministic, offsets continue the stream', () => {
    const n = 200_000;
    const p = malloc(n * 4);
    ops.randomNormal(false, 0, p, n, 9, 0);
    const z = readF32(p, n);
    let s = 0;
    let s2 = 0;
    let s4 = 0;
    let within1 = 0;
    for (const v of z) {
      s += v;
      s2 += v * v;
      s4 += v ** 4;
      if (Math.abs(v) < 1) within1++;
    }
    const mean = s / n;
    const variance = s2 / n - mean * mean;
    expect(Math.abs(mean)).toBeLessThan(0.01);
    expect(Math.abs(variance - 1)).toBeLessThan(0.015);
    expect(Math.abs(s4 / n - 3)).toBeLessThan(0.1);
    expect(Math.abs(within1 / n - 0.682689)).toBeLessThan(0.005);
    const q = malloc(400);
    ops.randomNormal(false, 0, q, 100, 9, 1000);
    expect(readF32(q, 100)).toEqual(z.subarray(1000, 1100));
    ops.randomNormal(false, 0, q, 100, 10, 1000);
    expect(readF32(q, 100)).not.toEqual(z.subarray(1000, 1100));
  });

  it('randomUniform: in [low, high), mean and spread, deterministic', () => {
    const n = 100_000;
    const p = malloc(n * 4);
    ops.randomUniform(false, 0, p, n, -2, 3, 5, 0);
    const u = readF32(p, n);
    let s = 0;
    let s2 = 0;
    for (const v of u) {
      if (!(v >= -2 && v < 3)) throw new Error(`${v} is outside [-2, 3)`);
      s += v;
      s2 += v * v;
    }
    const mean = s / n;
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.02);
    expect(Math.abs(s2 / n - mean * mean - 25 / 12)).toBeLessThan(0.03);
    // u = top 24 bits / 2^24, as documented
    for (let i = 0; i < 10; i++) {
      const unit = Number(bits(5, i) >> 40n) / 2 ** 24;
      expect(u[i]).toBe(Math.fround(-2 + 5 * unit));
    }
    ops.randomUniform(false, 0, p, 10, 1, 1, 5, 0);
    expect(Array.from(readF32(p, 10))).toEqual(new Array(10).fill(1));
    expect(() => ops.randomUniform(false, 0, p, 10, 2, 1, 5, 0)).toThrow(RangeError);
  });
});

describe('ops (CPU): fill, scale', () => {
  it('fill', () => {
    const p = malloc(40);
    ops.fillF32(false, 0, p, 10, 2.5);
    expect(Array.from(readF32(p, 10))).toEqual(new Array(10).fill(2.5));
    ops.fillI32(false, 0, p, 10, -3);
    expect(Array.from(readI32(p, 10))).toEqual(new Array(10).fill(-3));
  });

  it('scale', () => {
    const X = randf(33, 81);
    const px = f32(X);
    ops.scale(false, 0, -2, px, px, 33);
    expect(Array.from(readF32(px, 33))).toEqual(Array.from(X, (x) => -2 * x));
  });

  it('axpy: Y += alpha * X, rounded once per element (fma)', () => {
    const X = randf(33, 82);
    const Y = randf(33, 83);
    const [px, py] = [f32(X), f32(Y)];
    ops.axpy(false, 0, 0.5, px, py, 33);
    expect(Array.from(readF32(py, 33))).toEqual(Array.from(X, (x, i) => Math.fround(0.5 * x + Y[i]!)));
    expect(() => ops.axpy(false, 0, 1, 0, py, 1)).toThrow(/X/);
    expect(() => ops.axpy(false, 0, 1, px, py, -1)).toThrow(/n/);
  });

  it('addI32 advances a counter (wrapping like an i32); streamWait has nothing to order on the CPU', () => {
    const p = i32([7]);
    ops.addI32(false, 0, p, 1);
    ops.addI32(false, 0, p, -3);
    expect(readI32(p, 1)[0]).toBe(5);
    const q = i32([2 ** 31 - 1]);
    ops.addI32(false, 0, q, 1);
    expect(readI32(q, 1)[0]).toBe(-(2 ** 31));
    expect(() => ops.addI32(false, 0, p, 2 ** 31)).toThrow(
      /Expected an i32 \(integer in \[-2\^31, 2\^31 - 1\]\) for value but received 2147483648/,
    );
    expect(() => ops.addI32(false, 0, 0, 1)).toThrow(/ptr/);
    expect(() => ops.streamWait(false, 1, 2)).not.toThrow();
  });
});

describe('ops: bad arguments are errors, not crashes', () => {
  it('negative sizes name the argument', () => {
    const p = malloc(16);
    try {
      ops.gemm(false, 0, false, false, 2, -1, 2, 1, p, p, 0, p);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(RangeError);
      expect((e as { code?: string }).code).toBe('GPUMEM_INVALID_ARGUMENT');
      expect((e as { argument?: string }).argument).toBe('N');
    }
    expect(() => ops.spmm(false, 0, p, p, p, p, p, 4, -4)).toThrow('Expected non-negative integer for H but received -4');
    expect(() => ops.relu(false, 0, p, p, 1.5)).toThrow('Expected integer for n but received 1.5 of type number');
  });

  it('wrong types, missing arguments and null pointers throw', () => {
    const p = malloc(16);
    expect(() => (ops.relu as unknown as (...a: unknown[]) => void)(false, 0, p, p)).toThrow(TypeError);
    expect(() => (ops.relu as unknown as (...a: unknown[]) => void)(false, 0, 'x', p, 4)).toThrow(TypeError);
    expect(() => ops.relu(false, 0, -8, p, 4)).toThrow('Expected a pointer (non-negative integer) for X but received -8 of type number');
    expect(() => ops.relu(false, 0, 0, p, 4)).toThrow('Expected a pointer (positive integer) for X but received 0 (a null pointer)');
    expect(() => ops.csrBuild(false, 0, p, p, 1, 1, p, p, 0, -1)).toThrow(/tempBytes/);
  });

  it.skipIf(hasCudaDevice())('onDevice without a usable GPU throws', () => {
    const p = malloc(16);
    expect(() => ops.relu(true, 0, p, p, 4)).toThrow();
    const b = ops.gemmBackend();
    expect(['cublas', 'tiled']).toContain(b.backend);
    expect(b.reason.length).toBeGreaterThan(0);
  });
});

describe('ops (CPU): per-edge weights', () => {
  it('edgeNormList gives each edge the weight edgeNorm gives it in the CSR form', () => {
    // 4 nodes, edges src -> dst; degrees counted at targets
    const src = [0, 1, 2, 3, 3, 1];
    const dst = [1, 1, 0, 2, 0, 3];
    const deg = [2, 2, 1, 1];
    const w = nanF32(6);
    for (const mode of [0, 1, 2]) {
      ops.edgeNormList(false, 0, i32(src), i32(dst), f32(deg), 6, mode, w);
      const got = readF32(w, 6);
      src.forEach((s, e) => {
        const d = dst[e]!;
        const expected = mode === 0 ? 1 / Math.sqrt(deg[d]! * deg[s]!) : mode === 1 ? 1 / deg[d]! : 1 / deg[s]!;
        expect(got[e]).toBeCloseTo(expected, 6);
      });
    }
    expect(() => ops.edgeNormList(false, 0, i32(src), i32(dst), f32(deg), 6, 3, w)).toThrow(/mode/);
    expect(() => ops.edgeNormList(false, 0, i32([-1]), i32([0]), f32(deg), 1, 0, w)).toThrow(/src/);
  });

  it('scaleRows multiplies each row by its weight, also in place', () => {
    const x = randf(5 * 3, 11);
    const weights = [0.5, -2, 0, 1, 3];
    const out = nanF32(15);
    ops.scaleRows(false, 0, f32(x), f32(weights), out, 5, 3);
    const got = readF32(out, 15);
    for (let e = 0; e < 5; e++) for (let j = 0; j < 3; j++) expect(got[e * 3 + j]).toBe(Math.fround(x[e * 3 + j]! * weights[e]!));
    const inPlace = f32(x);
    ops.scaleRows(false, 0, inPlace, f32(weights), inPlace, 5, 3);
    expect(same(readF32(inPlace, 15), got)).toBe(true);
  });
});

describe('the MLP step on the CPU kernels: the fused and overlapped forms give the same numbers', () => {
  it('softmaxCrossEntropyBiasGrad + Mlp.backwardAndStep = softmaxCrossEntropy-then-biasGrad backward + SGD.step, bit for bit', () => {
    const rt = new Runtime(alloc);
    const side = 12345; // any stream handle: the CPU kernels run in call order
    const sizes = [20, 16, 16, 5];
    const rows = 8;
    const run = (overlapped: boolean) => {
      const model = new Mlp(rt, sizes, 3);
      const sgd = new SGD(rt, model.params, 0.1);
      const x = rt.keep(rt.fromArray(randf(rows * sizes[0]!, 60), [rows, sizes[0]!]));
      const y = rt.keep(rt.fromArray(randi(rows, sizes[3]!, 61), [rows]));
      const out = rt.keep(rt.zeros([4], 'i32')); // [loss, correct] of two steps
      for (let k = 0; k < 2; k++) {
        rt.scope(() => {
          const logits = model.forward(x);
          const d = softmaxCrossEntropyBiasGrad(rt, logits, y, model.output.bias.grad, out.ptr + 4 * k, out.ptr + 8 + 4 * k);
          if (overlapped) model.backwardAndStep(d, sgd, side, true);
          else {
            model.backward(d, true);
            sgd.step();
          }
        });
      }
      const result = { params: model.params.values.toFloat32(), grads: model.params.grads.toFloat32(), out: out.toArray() };
      for (const t of [x, y, out]) t.dispose();
      model.dispose();
      return result;
    };
    const plain = run(false);
    const overlapped = run(true);
    expectAllFinite(plain.params);
    expect(same(overlapped.params, plain.params)).toBe(true);
    expect(same(overlapped.grads, plain.grads)).toBe(true);
    expect(same(overlapped.out, plain.out)).toBe(true);
    expect(rt.liveTensors).toBe(0);
    const model = new Mlp(rt, sizes, 3);
    const sgd = new SGD(rt, model.params, 0.1);
    expect(() => sgd.stepRange(-1, 4)).toThrow(/Expected a range/);
    expect(() => sgd.stepRange(10, model.params.size)).toThrow(/Expected a range/);
    model.dispose();
  });
});
