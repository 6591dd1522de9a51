/**
 * The transformer ops of native-ops.ts (gemmStridedBatched, headsToBatch / batchToHeads, causalSoftmax,
 * layerNorm, gelu, embedding and their backwards).
 *
 * Everywhere: the CPU reference (onDevice = false) on host memory against float64 references written
 * here, on small random inputs, and the argument errors. With a CUDA device: the CUDA kernel against
 * the CPU reference on the same inputs, small ones and the default workload's sizes (T 1024, 48
 * heads, 12288 rows, 256 and 1024 columns), every output poisoned with NaN first so that an element left
 * unwritten shows, within 1e-5 relative L2 error (‖gpu − cpu‖ / ‖cpu‖), bit-identical where both paths
 * do the same float operations in the same order (the layout changes, embedding, dWpe), and
 * bit-identical from one GPU run to the next for every deterministic op. Skipped, with the reason in
 * the title, where there is no CUDA device (GPUMEM_REQUIRE_GPU=1 makes that a failure).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CudaAllocator, deviceStatus, HostAllocator, hasCudaDevice, loadNative } from '@gpumem/allocator-core';
import { seededRandom } from '@gpumem/allocator-core/tools';
import type { NativeOps } from './native-ops.js';

const gpu = hasCudaDevice();
const noGpuReason = gpu ? '' : deviceStatus();
if (!gpu && process.env.GPUMEM_REQUIRE_GPU === '1') throw new Error(`GPUMEM_REQUIRE_GPU=1 but ${noGpuReason}`);
const gpuTitle = (title: string) => (gpu ? title : `${title} [skipped: ${noGpuReason}]`);

const ops = (loadNative() as unknown as { ops: NativeOps }).ops;

/** n floats uniform in [lo, hi) from a small seeded generator (mulberry32). */
function randf(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  const next = seededRandom(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + next() * (hi - lo);
  return out;
}

/** n token ids in [0, V). */
function randTokens(n: number, V: number, seed: number): Int32Array {
  return Int32Array.from(randf(n, seed, 0, V), (v) => Math.min(V - 1, Math.floor(v)));
}

/** ‖a − b‖ / ‖b‖ (the absolute ‖a − b‖ when b is 0). */
function relL2(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`lengths ${a.length} != ${b.length}`);
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    const d = a[i]! - b[i]!;
    num += d * d;
    den += b[i]! * b[i]!;
  }
  return den === 0 ? Math.sqrt(num) : Math.sqrt(num / den);
}

/** Throws naming the first element that differs (Object.is: NaN equals NaN). */
function expectIdentical(a: ArrayLike<number>, b: ArrayLike<number>, what: string): void {
  if (a.length !== b.length) throw new Error(`${what}: lengths ${a.length} != ${b.length}`);
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) throw new Error(`${what}: element ${i} is ${a[i]}, expected ${b[i]}`);
}

function expectWritten(a: ArrayLike<number>, what: string): void {
  for (let i = 0; i < a.length; i++) if (Number.isNaN(a[i]!)) throw new Error(`${what}: element ${i} not written`);
}

// ---- float64 references ----------------------------------------------------------------------

interface GemmCase {
  ta: boolean;
  tb: boolean;
  M: number;
  N: number;
  K: number;
  alpha: number;
  beta: number;
  lda: number;
  ldb: number;
  ldc: number;
  strideA: number;
  strideB: number;
  strideC: number;
  batch: number;
}

/** A gemm case with padded leading dimensions and gaps between the matrices. */
function gemmCase(ta: boolean, tb: boolean, M: number, N: number, K: number, batch: number, pad: number): GemmCase {
  const lda = (ta ? M : K) + pad;
  const ldb = (tb ? K : N) + pad;
  const ldc = N + pad;
  return {
    ta,
    tb,
    M,
    N,
    K,
    alpha: 0.75,
    beta: 0.5,
    lda,
    ldb,
    ldc,
    strideA: (ta ? K : M) * lda + 2,
    strideB: (tb ? N : K) * ldb + 1,
    strideC: M * ldc + 3,
    batch,
  };
}

function gemmRef(g: GemmCase, A: Float32Array, B: Float32Array, C: Float32Array): Float64Array {
  const out = Float64Array.from(C);
  for (let i = 0; i < g.batch; i++)
    for (let m = 0; m < g.M; m++)
      for (let n = 0; n < g.N; n++) {
        let s = 0;
        for (let k = 0; k < g.K; k++) {
          const a = g.ta ? A[i * g.strideA + k * g.lda + m]! : A[i * g.strideA + m * g.lda + k]!;
          const b = g.tb ? B[i * g.strideB + n * g.ldb + k]! : B[i * g.strideB + k * g.ldb + n]!;
          s += a * b;
        }
        const at = i * g.strideC + m * g.ldc + n;
        out[at] = g.alpha * s + (g.beta === 0 ? 0 : g.beta * C[at]!);
      }
  return out;
}

function headsRef(X: Float32Array, ldx: number, B: number, T: number, H: number, D: number): Float64Array {
  const Y = new Float64Array(B * H * T * D);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) Y[((b * H + h) * T + t) * D + d] = X[(b * T + t) * ldx + h * D + d]!;
  return Y;
}

function softmaxRef(S: Float32Array, rows: number, T: number, scale: number): Float64Array {
  const P = new Float64Array(S.length);
  for (let q = 0; q < rows * T; q++) {
    const i = q % T;
    let m = -Infinity;
    for (let j = 0; j <= i; j++) m = Math.max(m, scale * S[q * T + j]!);
    let sum = 0;
    for (let j = 0; j <= i; j++) sum += Math.exp(scale * S[q * T + j]! - m);
    for (let j = 0; j <= i; j++) P[q * T + j] = Math.exp(scale * S[q * T + j]! - m) / sum;
  }
  return P;
}

function softmaxBackwardRef(P: Float32Array, dP: Float32Array, rows: number, T: number, scale: number): Float64Array {
  const dS = new Float64Array(P.length);
  for (let q = 0; q < rows * T; q++) {
    const i = q % T;
    let dot = 0;
    for (let k = 0; k <= i; k++) dot += P[q * T + k]! * dP[q * T + k]!;
    for (let j = 0; j <= i; j++) dS[q * T + j] = scale * P[q * T + j]! * (dP[q * T + j]! - dot);
  }
  return dS;
}

function layerNormRef(X: Float32Array, gamma: Float32Array, beta: Float32Array, rows: number, cols: number, eps: number) {
  const Y = new Float64Array(X.length);
  const mean = new Float64Array(rows);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let mu = 0;
    for (let c = 0; c < cols; c++) mu += X[r * cols + c]!;
    mu /= cols;
    let v = 0;
    for (let c = 0; c < cols; c++) v += (X[r * cols + c]! - mu) ** 2;
    const rs = 1 / Math.sqrt(v / cols + eps);
    for (let c = 0; c < cols; c++) Y[r * cols + c] = (X[r * cols + c]! - mu) * rs * gamma[c]! + beta[c]!;
    mean[r] = mu;
    rstd[r] = rs;
  }
  return { Y, mean, rstd };
}

function layerNormBackwardRef(
  dY: Float32Array,
  X: Float32Array,
  gamma: Float32Array,
  mean: Float32Array,
  rstd: Float32Array,
  rows: number,
  cols: number,
) {
  const dX = new Float64Array(X.length);
  const dGamma = new Float64Array(cols);
  const dBeta = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    let mg = 0;
    let mgx = 0;
    const xhat = (c: number) => (X[r * cols + c]! - mean[r]!) * rstd[r]!;
    for (let c = 0; c < cols; c++) {
      const g = dY[r * cols + c]! * gamma[c]!;
      mg += g;
      mgx += g * xhat(c);
    }
    mg /= cols;
    mgx /= cols;
    for (let c = 0; c < cols; c++) {
      const d = dY[r * cols + c]!;
      dX[r * cols + c] = rstd[r]! * (d * gamma[c]! - mg - xhat(c) * mgx);
      dGamma[c]! += d * xhat(c);
      dBeta[c]! += d;
    }
  }
  return { dX, dGamma, dBeta };
}

const geluK = Math.sqrt(2 / Math.PI);
const geluRef = (x: number) => 0.5 * x * (1 + Math.tanh(geluK * (x + 0.044715 * x ** 3)));
function geluGradRef(x: number): number {
  const t = Math.tanh(geluK * (x + 0.044715 * x ** 3));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * geluK * (1 + 3 * 0.044715 * x * x);
}

// ---- the CPU references against float64 ----------------------------------------------------------

describe('transformer ops (CPU reference) against float64', () => {
  const host = new HostAllocator();
  const live: [number, number][] = [];
  afterAll(() => {
    for (const [p, n] of live) host.free(p, n);
    host.dispose();
  });
  function put(data: Float32Array | Int32Array): number {
    const n = Math.max(16, data.byteLength);
    const p = host.malloc(n);
    live.push([p, n]);
    host.write(p, data);
    return p;
  }
  const nan = (n: number) => put(new Float32Array(n).fill(NaN));
  function read(p: number, n: number): Float32Array {
    const out = new Float32Array(n);
    host.read(p, out);
    return out;
  }

  it('gemmStridedBatched, every transpose, padded leading dimensions, gaps between matrices', () => {
    for (const [ta, tb] of [
      [false, false],
      [true, false],
      [false, true],
      [true, true],
    ] as const) {
      const g = gemmCase(ta, tb, 7, 5, 9, 3, 2);
      const A = randf(g.strideA * g.batch, 1);
      const B = randf(g.strideB * g.batch, 2);
      const C = randf(g.strideC * g.batch, 3);
      const c = put(C);
      ops.gemmStridedBatched(
        false,
        0,
        ta,
        tb,
        g.M,
        g.N,
        g.K,
        g.alpha,
        put(A),
        g.lda,
        g.strideA,
        put(B),
        g.ldb,
        g.strideB,
        g.beta,
        c,
        g.ldc,
        g.strideC,
        g.batch,
      );
      expect(relL2(read(c, C.length), gemmRef(g, A, B, C))).toBeLessThan(1e-6);
    }
  });

  it('gemmStridedBatched rejects bad sizes with a RangeError naming the argument', () => {
    const p = nan(64);
    const call = (M: number, lda: number, strideC: number, batch: number) => () =>
      ops.gemmStridedBatched(false, 0, false, false, M, 2, 2, 1, p, lda, 4, p, 2, 4, 0, p, 2, strideC, batch);
    expect(call(0, 2, 4, 1)).toThrow(/for M but received 0/);
    expect(call(2, 1, 4, 1)).toThrow(RangeError);
    expect(call(2, 1, 4, 1)).toThrow(/for lda/);
    expect(call(2, 2, 4, 0)).toThrow(/for batch/);
    expect(call(2, 2, 1, 2)).toThrow(/for strideC/);
  });

  it('headsToBatch and batchToHeads: exact, and batchToHeads writes only its elements', () => {
    const [B, T, H, D] = [2, 5, 3, 4];
    const ldx = 3 * H * D;
    const qkv = randf(B * T * ldx, 4);
    const x = put(qkv);
    const y = nan(B * H * T * D);
    ops.headsToBatch(false, 0, x + H * D * 4, ldx, y, B, T, H, D); // k: the second third of each row
    const Y = read(y, B * H * T * D);
    expectIdentical(Y, headsRef(qkv.subarray(H * D), ldx, B, T, H, D), 'headsToBatch');
    const back = put(new Float32Array(B * T * ldx).fill(-9));
    ops.batchToHeads(false, 0, y, back + H * D * 4, ldx, B, T, H, D);
    const got = read(back, B * T * ldx);
    const want = Float32Array.from(qkv, (v, i) => (i % ldx >= H * D && i % ldx < 2 * H * D ? v : -9));
    expectIdentical(got, want, 'batchToHeads');
    expect(() => ops.headsToBatch(false, 0, x, H * D - 1, y, B, T, H, D)).toThrow(/for ldx/);
    expect(() => ops.batchToHeads(false, 0, y, x, ldx, B, 0, H, D)).toThrow(/for T/);
  });

  it('causalSoftmax and its backward', () => {
    const [rows, T, scale] = [4, 19, 0.3];
    const S = randf(rows * T * T, 5, -4, 4);
    const s = put(S);
    const p = nan(S.length);
    ops.causalSoftmax(false, 0, s, p, rows, T, scale);
    const P = read(p, S.length);
    expect(relL2(P, softmaxRef(S, rows, T, scale))).toBeLessThan(1e-6);
    for (let q = 0; q < rows * T; q++) for (let j = (q % T) + 1; j < T; j++) expect(P[q * T + j]).toBe(0);
    ops.causalSoftmax(false, 0, s, s, rows, T, scale); // in place
    expectIdentical(read(s, S.length), P, 'causalSoftmax in place');

    const dP = randf(S.length, 6);
    const dp = put(dP);
    const ds = nan(S.length);
    ops.causalSoftmaxBackward(false, 0, p, dp, ds, rows, T, scale);
    const dS = read(ds, S.length);
    expect(relL2(dS, softmaxBackwardRef(P, dP, rows, T, scale))).toBeLessThan(1e-6);
    ops.causalSoftmaxBackward(false, 0, p, dp, dp, rows, T, scale); // in place
    expectIdentical(read(dp, S.length), dS, 'causalSoftmaxBackward in place');
    expect(() => ops.causalSoftmax(false, 0, s, p, 0, T, scale)).toThrow(/for rows/);
    expect(() => ops.causalSoftmaxBackward(false, 0, p, dp, 0, rows, T, scale)).toThrow(TypeError);
  });

  it('layerNorm and its backward (with accumulate)', () => {
    const [rows, cols, eps] = [6, 33, 1e-5];
    const X = randf(rows * cols, 7, -2, 3);
    const gamma = randf(cols, 8, 0.5, 1.5);
    const beta = randf(cols, 9);
    const y = nan(X.length);
    const mean = nan(rows);
    const rstd = nan(rows);
    const x = put(X);
    const gm = put(gamma);
    ops.layerNorm(false, 0, x, gm, put(beta), y, mean, rstd, rows, cols, eps);
    const ref = layerNormRef(X, gamma, beta, rows, cols, eps);
    expect(relL2(read(y, X.length), ref.Y)).toBeLessThan(1e-6);
    expect(relL2(read(mean, rows), ref.mean)).toBeLessThan(1e-6);
    expect(relL2(read(rstd, rows), ref.rstd)).toBeLessThan(1e-6);

    const dY = randf(X.length, 10);
    const dx = nan(X.length);
    const init = randf(cols, 11);
    const dg = put(init);
    const db = put(init);
    ops.layerNormBackward(false, 0, put(dY), x, gm, mean, rstd, dx, dg, db, rows, cols, true);
    const back = layerNormBackwardRef(dY, X, gamma, read(mean, rows), read(rstd, rows), rows, cols);
    expect(relL2(read(dx, X.length), back.dX)).toBeLessThan(1e-5);
    expect(
      relL2(
        read(dg, cols),
        back.dGamma.map((v, c) => v + init[c]!),
      ),
    ).toBeLessThan(1e-6);
    expect(
      relL2(
        read(db, cols),
        back.dBeta.map((v, c) => v + init[c]!),
      ),
    ).toBeLessThan(1e-6);
    expect(() => ops.layerNorm(false, 0, x, gm, gm, y, mean, rstd, rows, 0, eps)).toThrow(/for cols/);
  });

  it('gelu and its backward', () => {
    const n = 301;
    const X = randf(n, 12, -4, 4);
    const x = put(X);
    const y = nan(n);
    ops.gelu(false, 0, x, y, n);
    expect(relL2(read(y, n), Float64Array.from(X, geluRef))).toBeLessThan(1e-6);
    const dY = randf(n, 13);
    const dx = nan(n);
    ops.geluBackward(false, 0, x, put(dY), dx, n);
    expect(
      relL2(
        read(dx, n),
        Float64Array.from(X, (v, i) => dY[i]! * geluGradRef(v)),
      ),
    ).toBeLessThan(1e-6);
    expect(() => ops.gelu(false, 0, x, y, 0)).toThrow(/for n/);
  });

  it('embedding and its backward; a negative token id throws before anything is written', () => {
    const [B, T, C, V] = [3, 4, 5, 7];
    const tokens = randTokens(B * T, V, 14);
    const wte = randf(V * C, 15);
    const wpe = randf(T * C, 16);
    const tk = put(tokens);
    const out = nan(B * T * C);
    const te = put(wte);
    const pe = put(wpe);
    ops.embedding(false, 0, tk, te, pe, out, B, T, C);
    const want = new Float32Array(B * T * C);
    for (let r = 0; r < B * T; r++) for (let c = 0; c < C; c++) want[r * C + c] = wte[tokens[r]! * C + c]! + wpe[(r % T) * C + c]!;
    expectIdentical(read(out, B * T * C), want, 'embedding');

    const dOut = randf(B * T * C, 17);
    const dwte = put(new Float32Array(V * C));
    const dwpe = put(new Float32Array(T * C));
    ops.embeddingBackward(false, 0, put(dOut), tk, dwte, dwpe, B, T, C);
    const dWte = new Float64Array(V * C);
    const dWpe = new Float64Array(T * C);
    for (let r = 0; r < B * T; r++)
      for (let c = 0; c < C; c++) {
        dWte[tokens[r]! * C + c]! += dOut[r * C + c]!;
        dWpe[(r % T) * C + c]! += dOut[r * C + c]!;
      }
    expect(relL2(read(dwte, V * C), dWte)).toBeLessThan(1e-6);
    expect(relL2(read(dwpe, T * C), dWpe)).toBeLessThan(1e-6);

    const bad = Int32Array.from(tokens);
    bad[5] = -1;
    const before = read(out, B * T * C);
    expect(() => ops.embedding(false, 0, put(bad), te, pe, out, B, T, C)).toThrow(/tokens\[5\]/);
    expectIdentical(read(out, B * T * C), before, 'out after a rejected call');
  });
});

// ---- the CUDA kernels against the CPU reference ---------------------------------------------------

describe.skipIf(!gpu)(gpuTitle('transformer ops on the GPU against the CPU reference'), () => {
  let dev: CudaAllocator;
  let host: HostAllocator;
  const live: { a: CudaAllocator | HostAllocator; p: number; n: number }[] = [];
  beforeAll(() => {
    dev = new CudaAllocator();
    host = new HostAllocator();
  });
  afterAll(() => {
    for (const { a, p, n } of live.reverse()) a.free(p, n);
    dev?.dispose();
    host?.dispose();
  });

  /** The same buffer on the host (h) and on the device (d). */
  class Twin<T extends Float32Array | Int32Array> {
    readonly h: number;
    readonly d: number;
    constructor(
      private readonly ctor: { new (n: number): T; BYTES_PER_ELEMENT: number },
      readonly n: number,
    ) {
      const bytes = Math.max(16, n * ctor.BYTES_PER_ELEMENT);
      this.h = host.malloc(bytes);
      this.d = dev.malloc(bytes);
      live.push({ a: host, p: this.h, n: bytes }, { a: dev, p: this.d, n: bytes });
    }
    set(data: Float32Array | Int32Array): this {
      host.write(this.h, data);
      dev.write(this.d, data);
      return this;
    }
    cpu(): T {
      const out = new this.ctor(this.n);
      host.read(this.h, out);
      return out;
    }
    gpu(): T {
      const out = new this.ctor(this.n);
      dev.read(this.d, out);
      return out;
    }
  }
  const F = (data: Float32Array) => new Twin(Float32Array, data.length).set(data);
  const Fz = (n: number) => F(new Float32Array(n).fill(NaN));
  const I = (data: Int32Array) => new Twin(Int32Array, data.length).set(data);

  /**
   * Runs the op on the CPU (host twins) and on the GPU (device twins), compares each output, then, for
   * a deterministic op, puts the device outputs back as they were, runs the GPU again and expects the
   * same bits.
   */
  function compare(
    outs: Twin<Float32Array>[],
    run: (onDevice: boolean) => void,
    opts: { identical?: boolean; deterministic?: boolean } = {},
  ) {
    const initial = outs.map((o) => o.gpu());
    run(false);
    run(true);
    const first = outs.map((o) => o.gpu());
    for (const [k, o] of outs.entries()) {
      expectWritten(first[k]!, `output ${k}`);
      if (opts.identical) expectIdentical(first[k]!, o.cpu(), `output ${k}`);
      else expect(relL2(first[k]!, o.cpu()), `output ${k}`).toBeLessThan(1e-5);
    }
    if (opts.deterministic === false) return;
    for (const [k, o] of outs.entries()) dev.write(o.d, initial[k]!);
    run(true);
    for (const [k, o] of outs.entries()) expectIdentical(o.gpu(), first[k]!, `output ${k}, second GPU run`);
  }
  const side = (onDevice: boolean, t: { h: number; d: number }) => (onDevice ? t.d : t.h);

  /**
   * layerNorm's inputs (X, gamma and beta from the three seeds), its forward compared on both sides,
   * then the CPU's mean and rstd put on both sides; `backward` runs layerNormBackward on these
   * inputs on one side (dX may be dY: in place).
   */
  function layerNormCase(rows: number, cols: number, [xSeed, gammaSeed, betaSeed]: readonly [number, number, number]) {
    const X = F(randf(rows * cols, xSeed, -2, 3));
    const gamma = F(randf(cols, gammaSeed, 0.5, 1.5));
    const beta = F(randf(cols, betaSeed));
    const Y = Fz(rows * cols);
    const mean = Fz(rows);
    const rstd = Fz(rows);
    compare([Y, mean, rstd], (d) =>
      ops.layerNorm(d, 0, side(d, X), side(d, gamma), side(d, beta), side(d, Y), side(d, mean), side(d, rstd), rows, cols, 1e-5),
    );
    mean.set(mean.cpu());
    rstd.set(rstd.cpu());
    type T = Twin<Float32Array>;
    const backward = (d: boolean, dY: T, dX: T, dGamma: T, dBeta: T, accumulate: boolean) =>
      ops.layerNormBackward(
        d,
        0,
        side(d, dY),
        side(d, X),
        side(d, gamma),
        side(d, mean),
        side(d, rstd),
        side(d, dX),
        side(d, dGamma),
        side(d, dBeta),
        rows,
        cols,
        accumulate,
      );
    return { backward };
  }

  for (const tiled of [false, true]) {
    it(`gemmStridedBatched (${tiled ? 'tiled kernel, forced' : ops.gemmBackend().backend}): attention's shapes, every transpose, padded`, () => {
      if (tiled) process.env.GPUMEM_GEMM = 'tiled';
      try {
        const cases: GemmCase[] = [
          gemmCase(false, true, 67, 67, 16, 6, 0), // S = Q K^T
          gemmCase(false, false, 67, 16, 67, 6, 0), // O = P V
          gemmCase(true, false, 67, 16, 67, 6, 3), // dV = P^T dO
          gemmCase(true, true, 33, 70, 129, 3, 1),
        ];
        for (const g of cases) {
          const A = F(randf(g.strideA * g.batch, 20));
          const B = F(randf(g.strideB * g.batch, 21));
          const C = F(randf(g.strideC * g.batch, 22));
          compare([C], (d) =>
            ops.gemmStridedBatched(
              d,
              0,
              g.ta,
              g.tb,
              g.M,
              g.N,
              g.K,
              g.alpha,
              side(d, A),
              g.lda,
              g.strideA,
              side(d, B),
              g.ldb,
              g.strideB,
              g.beta,
              side(d, C),
              g.ldc,
              g.strideC,
              g.batch,
            ),
          );
        }
        // beta 0 does not read C (NaN stays out), strideB 0 shares one B, outputs interleaved as heads.
        const [M, N, K, heads] = [40, 8, 24, 4];
        const A = F(randf(heads * M * K, 23));
        const B = F(randf(K * N, 24));
        const C = Fz(M * heads * N);
        compare([C], (d) =>
          ops.gemmStridedBatched(
            d,
            0,
            false,
            false,
            M,
            N,
            K,
            1,
            side(d, A),
            K,
            M * K,
            side(d, B),
            N,
            0,
            0,
            side(d, C),
            heads * N,
            N,
            heads,
          ),
        );
      } finally {
        delete process.env.GPUMEM_GEMM;
      }
    });
  }

  it('headsToBatch and batchToHeads (float4 and scalar paths): identical', () => {
    for (const D of [16, 10]) {
      const [B, T, H] = [3, 37, 4];
      const ldx = 3 * H * D;
      const qkv = F(randf(B * T * ldx, 30 + D));
      const y = Fz(B * H * T * D);
      compare([y], (d) => ops.headsToBatch(d, 0, side(d, qkv) + H * D * 4, ldx, side(d, y), B, T, H, D), { identical: true });
      const back = F(new Float32Array(B * T * ldx).fill(-9));
      compare([back], (d) => ops.batchToHeads(d, 0, side(d, y), side(d, back) + 2 * H * D * 4, ldx, B, T, H, D), { identical: true });
    }
  });

  it('causalSoftmax (out of and in place) and its backward: < 1e-5, deterministic', () => {
    for (const T of [1, 31, 67, 256]) {
      const rows = 6;
      const S = F(randf(rows * T * T, 40 + T, -6, 6));
      const P = Fz(rows * T * T);
      const scale = 1 / Math.sqrt(16);
      compare([P], (d) => ops.causalSoftmax(d, 0, side(d, S), side(d, P), rows, T, scale));
      const inplace = F(S.cpu());
      compare([inplace], (d) => ops.causalSoftmax(d, 0, side(d, inplace), side(d, inplace), rows, T, scale), { deterministic: false });
      P.set(P.cpu()); // the same P on both sides for the backward
      const dP = F(randf(rows * T * T, 50 + T));
      const dS = Fz(rows * T * T);
      compare([dS], (d) => ops.causalSoftmaxBackward(d, 0, side(d, P), side(d, dP), side(d, dS), rows, T, scale));
    }
  });

  it('layerNorm and its backward (one chunk, several chunks, column slabs; accumulate): < 1e-5, deterministic', () => {
    for (const [rows, cols] of [
      [64, 768],
      [1000, 100],
      [130, 1500],
    ] as const) {
      const { backward } = layerNormCase(rows, cols, [rows + cols, 60, 61]);
      const dY = F(randf(rows * cols, 62));
      const dX = Fz(rows * cols);
      for (const accumulate of [false, true]) {
        const dGamma = accumulate ? F(randf(cols, 63)) : Fz(cols);
        const dBeta = accumulate ? F(randf(cols, 64)) : Fz(cols);
        compare([dX, dGamma, dBeta], (d) => backward(d, dY, dX, dGamma, dBeta, accumulate));
      }
    }
  });

  it('gelu and its backward (in place too): < 1e-5', () => {
    const n = 100_003;
    const X = F(randf(n, 70, -6, 6));
    const Y = Fz(n);
    compare([Y], (d) => ops.gelu(d, 0, side(d, X), side(d, Y), n));
    const dY = F(randf(n, 71));
    const dX = Fz(n);
    compare([dX], (d) => ops.geluBackward(d, 0, side(d, X), side(d, dY), side(d, dX), n));
    compare([dY], (d) => ops.geluBackward(d, 0, side(d, X), side(d, dY), side(d, dY), n), { deterministic: false });
  });

  // The default workload's sizes (vocab 256, embed 256, 4 heads of 64, 4C = 1024, T up to 1024, B up
  // to 12: B*H = 48 heads, B*T = 12288 rows), where the small cases above leave grid-stride loops,
  // chunk counts and column slabs untried. Same comparisons: < 1e-5 relative L2, identical where
  // the two paths do the same float operations in the same order.
  describe('at the default workload sizes (T 1024, B*H 48, 12288 rows, 256 and 1024 columns)', () => {
    const [B, T, H, D] = [12, 1024, 4, 64];
    const C = H * D;
    const rows = B * T;
    const heads = B * H;

    it('gemmStridedBatched: S = Q Kᵀ, O = P V, dV = Pᵀ dO, dQ = dS K over 48 heads of 1024 x 1024', () => {
      const q = F(randf(heads * T * D, 100));
      const k = F(randf(heads * T * D, 101));
      const p = F(randf(heads * T * T, 102, 0, 1 / 64));
      const s = Fz(heads * T * T);
      compare([s], (d) =>
        ops.gemmStridedBatched(d, 0, false, true, T, T, D, 1, side(d, q), D, T * D, side(d, k), D, T * D, 0, side(d, s), T, T * T, heads),
      );
      const o = Fz(heads * T * D);
      compare([o], (d) =>
        ops.gemmStridedBatched(d, 0, false, false, T, D, T, 1, side(d, p), T, T * T, side(d, k), D, T * D, 0, side(d, o), D, T * D, heads),
      );
      const dv = Fz(heads * T * D);
      compare([dv], (d) =>
        ops.gemmStridedBatched(d, 0, true, false, T, D, T, 1, side(d, p), T, T * T, side(d, q), D, T * D, 0, side(d, dv), D, T * D, heads),
      );
    });

    it('headsToBatch and batchToHeads of q, k and v in a [12288, 768] qkv: identical', () => {
      const qkv = F(randf(rows * 3 * C, 110));
      for (const part of [0, 1, 2]) {
        const y = Fz(heads * T * D);
        compare([y], (d) => ops.headsToBatch(d, 0, side(d, qkv) + part * C * 4, 3 * C, side(d, y), B, T, H, D), { identical: true });
        const back = F(new Float32Array(rows * 3 * C).fill(-9));
        compare([back], (d) => ops.batchToHeads(d, 0, side(d, y), side(d, back) + part * C * 4, 3 * C, B, T, H, D), { identical: true });
      }
    });

    it('causalSoftmax (in place, as the model calls it) and its backward over 48 x 1024 query rows', () => {
      const scale = 1 / Math.sqrt(D);
      const S = randf(heads * T * T, 120, -8, 8);
      const P = F(S);
      compare([P], (d) => ops.causalSoftmax(d, 0, side(d, P), side(d, P), heads, T, scale), { deterministic: false });
      P.set(P.cpu());
      const dS = F(randf(heads * T * T, 121));
      compare([dS], (d) => ops.causalSoftmaxBackward(d, 0, side(d, P), side(d, dS), side(d, dS), heads, T, scale), {
        deterministic: false,
      });
    });

    it('layerNorm and its backward over 12288 rows of 256 and of 1024 columns (dX over dY, as the model calls it)', () => {
      for (const cols of [C, 4 * C]) {
        const { backward } = layerNormCase(rows, cols, [130 + cols, 131, 132]);
        const dY = F(randf(rows * cols, 133));
        const dGamma = Fz(cols);
        const dBeta = Fz(cols);
        compare([dY, dGamma, dBeta], (d) => backward(d, dY, dY, dGamma, dBeta, false), { deterministic: false });
      }
    });

    it('gelu and its backward over [12288, 1024]', () => {
      const n = rows * 4 * C;
      const X = F(randf(n, 140, -6, 6));
      const Y = Fz(n);
      compare([Y], (d) => ops.gelu(d, 0, side(d, X), side(d, Y), n));
      const dY = F(randf(n, 141));
      compare([dY], (d) => ops.geluBackward(d, 0, side(d, X), side(d, dY), side(d, dY), n), { deterministic: false });
    });

    it('embedding and its backward: 12 x 1024 tokens of 256, width 256, 1024 positions', () => {
      const V = 256;
      const tokens = I(randTokens(rows, V, 150));
      const wte = F(randf(V * C, 151));
      const wpe = F(randf(T * C, 152));
      const out = Fz(rows * C);
      compare([out], (d) => ops.embedding(d, 0, side(d, tokens), side(d, wte), side(d, wpe), side(d, out), B, T, C), { identical: true });
      const dOut = F(randf(rows * C, 153));
      const dWte = F(new Float32Array(V * C));
      const dWpe = F(new Float32Array(T * C));
      compare([dWte, dWpe], (d) => ops.embeddingBackward(d, 0, side(d, dOut), side(d, tokens), side(d, dWte), side(d, dWpe), B, T, C), {
        deterministic: false,
      });
    });
  });

  it('embedding (identical) and its backward: dWpe identical and deterministic, dWte (atomics) < 1e-5', () => {
    const [B, T, C, V] = [8, 64, 48, 50];
    const tokens = I(randTokens(B * T, V, 80));
    const wte = F(randf(V * C, 81));
    const wpe = F(randf(128 * C, 82));
    const out = Fz(B * T * C);
    compare([out], (d) => ops.embedding(d, 0, side(d, tokens), side(d, wte), side(d, wpe), side(d, out), B, T, C), { identical: true });
    const dOut = F(randf(B * T * C, 83));
    // Both gradients accumulate: each comparison starts from fresh twins (the other gradient is scratch).
    const grads = () => ({ dWte: F(randf(V * C, 84)), dWpe: F(randf(128 * C, 85)) });
    const a = grads();
    compare([a.dWpe], (d) => ops.embeddingBackward(d, 0, side(d, dOut), side(d, tokens), side(d, a.dWte), side(d, a.dWpe), B, T, C), {
      identical: true,
    });
    const b = grads();
    compare([b.dWte], (d) => ops.embeddingBackward(d, 0, side(d, dOut), side(d, tokens), side(d, b.dWte), side(d, b.dWpe), B, T, C), {
      deterministic: false,
    });
  });
});
