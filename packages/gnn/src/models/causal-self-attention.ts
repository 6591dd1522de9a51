/**
 * Causal multi-head self-attention with explicit forward and backward: qkv = x Wqkvᵀ + b, the heads
 * laid out as [B, H, T, D] matrices, P = causal softmax(Q Kᵀ / sqrt(D)) and Y = P V as strided
 * batched products (one launch each over the B·H heads), then the output projection. Forward keeps
 * what backward needs (q, k, v, P and the heads' output before the projection: what PyTorch's
 * eager attention keeps) and backward frees each as soon as it has used it.
 * @module
 */
import { Linear, type ParameterSet } from '../framework/nn.js';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';

/** What forward keeps for backward. */
interface SavedAttention {
  B: number;
  T: number;
  q: Tensor; // [B, H, T, D]
  k: Tensor; // [B, H, T, D]
  v: Tensor; // [B, H, T, D]
  p: Tensor; // [B*H*T, T], the causal softmax (0 above the diagonal)
  y: Tensor; // [B*T, C], the heads' output: the projection's input
}

export class CausalSelfAttention {
  readonly qkv: Linear; // C -> 3C
  readonly proj: Linear; // C -> C
  readonly headSize: number;
  #saved: SavedAttention | undefined;

  /** The parameters of the attention named `name` (its qkv and output projections), for a ParameterSet. */
  static parameterSpecs(name: string, embed: number) {
    return [...Linear.parameterSpecs(`${name}.qkv`, embed, 3 * embed), ...Linear.parameterSpecs(`${name}.proj`, embed, embed)];
  }

  constructor(
    private readonly rt: Runtime,
    readonly name: string,
    readonly embed: number,
    readonly heads: number,
    params: ParameterSet,
  ) {
    if (!Number.isSafeInteger(heads) || heads < 1 || embed % heads !== 0)
      throw new RangeError(`Expected a number of heads that divides embed ${embed} but received ${String(heads)}`);
    this.headSize = embed / heads;
    this.qkv = new Linear(rt, `${name}.qkv`, embed, 3 * embed, params);
    this.proj = new Linear(rt, `${name}.proj`, embed, embed, params);
  }

  /** The scale of the scores, 1/sqrt(D). */
  get #scale(): number {
    return 1 / Math.sqrt(this.headSize);
  }

  /**
   * S_i = A_i op(B_i) over the B·H heads, each [rows, cols] = [T, inner] x [inner, cols], strided by
   * the heads' matrices.
   */
  #batched(transA: boolean, transB: boolean, M: number, N: number, K: number, A: Tensor, B: Tensor, C: Tensor, heads: number): void {
    const { rt } = this;
    const [lda, strideA] = transA ? [M, K * M] : [K, M * K];
    const [ldb, strideB] = transB ? [K, N * K] : [N, K * N];
    rt.ops.gemmStridedBatched(
      rt.onDevice,
      rt.s,
      transA,
      transB,
      M,
      N,
      K,
      1,
      A.ptr,
      lda,
      strideA,
      B.ptr,
      ldb,
      strideB,
      0,
      C.ptr,
      N,
      M * N,
      heads,
    );
  }

  /** x: [B*T, C] → [B*T, C], a new tensor. `save` false (evaluation): everything is freed as soon as it is used. */
  forward(x: Tensor, B: number, T: number, save = true): Tensor {
    const { rt, heads, headSize: D, embed: C } = this;
    const bh = B * heads;
    const qkv = this.qkv.forward(x); // [B*T, 3C]
    const [q, k, v] = [0, 1, 2].map((part) => {
      const t = rt.empty([B, heads, T, D]);
      rt.ops.headsToBatch(rt.onDevice, rt.s, qkv.ptr + 4 * part * C, 3 * C, t.ptr, B, T, heads, D);
      return t;
    }) as [Tensor, Tensor, Tensor];
    qkv.dispose();
    const p = rt.empty([bh * T, T]);
    this.#batched(false, true, T, T, D, q, k, p, bh); // raw scores Q Kᵀ
    rt.ops.causalSoftmax(rt.onDevice, rt.s, p.ptr, p.ptr, bh, T, this.#scale); // in place
    const attended = rt.empty([B, heads, T, D]);
    this.#batched(false, false, T, D, T, p, v, attended, bh); // P V
    const y = rt.empty([B * T, C]);
    rt.ops.batchToHeads(rt.onDevice, rt.s, attended.ptr, y.ptr, C, B, T, heads, D);
    attended.dispose();
    const out = this.proj.forward(y);
    if (save) this.#saved = { B, T, q, k, v, p, y };
    else {
      for (const t of [q, k, v, p, y]) t.dispose();
      this.qkv.release();
      this.proj.release();
    }
    return out;
  }

  /** dOut: [B*T, C] (left as it is) → dx [B*T, C], a new tensor; writes the projections' gradients and frees what forward kept. */
  backward(dOut: Tensor): Tensor {
    const saved = this.#saved;
    if (!saved) throw new Error(`${this.name}: backward before forward`);
    this.#saved = undefined;
    const { rt, heads, headSize: D, embed: C } = this;
    const { B, T, q, k, v, p, y } = saved;
    const bh = B * heads;
    const dy = this.proj.backward(dOut)!; // [B*T, C]
    y.dispose();
    const dHeads = rt.empty([B, heads, T, D]);
    rt.ops.headsToBatch(rt.onDevice, rt.s, dy.ptr, C, dHeads.ptr, B, T, heads, D);
    dy.dispose();
    const dp = rt.empty([bh * T, T]);
    this.#batched(false, true, T, T, D, dHeads, v, dp, bh); // dP = dY Vᵀ
    const dv = rt.empty([B, heads, T, D]);
    this.#batched(true, false, T, D, T, p, dHeads, dv, bh); // dV = Pᵀ dY
    dHeads.dispose();
    v.dispose();
    rt.ops.causalSoftmaxBackward(rt.onDevice, rt.s, p.ptr, dp.ptr, dp.ptr, bh, T, this.#scale); // dS over dP
    p.dispose();
    const dq = rt.empty([B, heads, T, D]);
    this.#batched(false, false, T, D, T, dp, k, dq, bh); // dQ = dS K
    const dk = rt.empty([B, heads, T, D]);
    this.#batched(true, false, T, D, T, dp, q, dk, bh); // dK = dSᵀ Q
    dp.dispose();
    q.dispose();
    k.dispose();
    const dqkv = rt.empty([B * T, 3 * C]);
    [dq, dk, dv].forEach((d, part) => {
      rt.ops.batchToHeads(rt.onDevice, rt.s, d.ptr, dqkv.ptr + 4 * part * C, 3 * C, B, T, heads, D);
      d.dispose();
    });
    const dx = this.qkv.backward(dqkv)!;
    dqkv.dispose();
    return dx;
  }
}
