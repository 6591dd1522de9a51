/**
 * A pre-LN transformer block: x + Attn(LN1(x)), then + MLP(LN2(·)) with MLP = Linear C→4C, GELU
 * (tanh), Linear 4C→C. Forward keeps what backward needs; backward adds the block's gradient to the
 * residual stream's in place and frees what forward kept as it goes.
 * @module
 */
import { LayerNorm } from '../framework/layer-norm.js';
import { Linear, type ParameterSet } from '../framework/nn.js';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import { CausalSelfAttention } from './causal-self-attention.js';

/** What forward keeps for backward (the block's input x stays with the caller, which keeps it until backward). */
interface SavedBlock {
  a: Tensor; // [B*T, C] LN1(x): the attention's input
  x1: Tensor; // [B*T, C] x + Attn(a): LN2's input
  b: Tensor; // [B*T, C] LN2(x1): the MLP's input
  h: Tensor; // [B*T, 4C] the first MLP layer's output, GELU's input
  g: Tensor; // [B*T, 4C] GELU(h): the second MLP layer's input
}

export class TransformerBlock {
  readonly ln1: LayerNorm;
  readonly attn: CausalSelfAttention;
  readonly ln2: LayerNorm;
  readonly fc: Linear; // C -> 4C
  readonly fcProj: Linear; // 4C -> C
  #saved: SavedBlock | undefined;

  /** The parameters of the block named `name`, for a ParameterSet. */
  static parameterSpecs(name: string, embed: number) {
    return [
      ...LayerNorm.parameterSpecs(`${name}.ln1`, embed),
      ...CausalSelfAttention.parameterSpecs(`${name}.attn`, embed),
      ...LayerNorm.parameterSpecs(`${name}.ln2`, embed),
      ...Linear.parameterSpecs(`${name}.mlp.fc`, embed, 4 * embed),
      ...Linear.parameterSpecs(`${name}.mlp.proj`, 4 * embed, embed),
    ];
  }

  constructor(
    private readonly rt: Runtime,
    readonly name: string,
    readonly embed: number,
    heads: number,
    params: ParameterSet,
  ) {
    this.ln1 = new LayerNorm(rt, `${name}.ln1`, embed, params);
    this.attn = new CausalSelfAttention(rt, `${name}.attn`, embed, heads, params);
    this.ln2 = new LayerNorm(rt, `${name}.ln2`, embed, params);
    this.fc = new Linear(rt, `${name}.mlp.fc`, embed, 4 * embed, params);
    this.fcProj = new Linear(rt, `${name}.mlp.proj`, 4 * embed, embed, params);
  }

  /** x: [B*T, C] (left as it is) → the block's output [B*T, C], a new tensor. `save` false (evaluation): nothing is kept. */
  forward(x: Tensor, B: number, T: number, save = true): Tensor {
    const { rt } = this;
    const a = this.ln1.forward(x, save);
    const x1 = this.attn.forward(a, B, T, save);
    rt.ops.axpy(rt.onDevice, rt.s, 1, x.ptr, x1.ptr, x1.size); // the residual: x1 = x + Attn(a)
    if (!save) a.dispose();
    const b = this.ln2.forward(x1, save);
    const h = this.fc.forward(b);
    const g = rt.empty(h.shape);
    rt.ops.gelu(rt.onDevice, rt.s, h.ptr, g.ptr, h.size);
    const out = this.fcProj.forward(g);
    rt.ops.axpy(rt.onDevice, rt.s, 1, x1.ptr, out.ptr, out.size); // the residual: out = x1 + MLP(b)
    if (save) this.#saved = { a, x1, b, h, g };
    else {
      for (const t of [x1, b, h, g]) t.dispose();
      this.fc.release();
      this.fcProj.release();
    }
    return out;
  }

  /**
   * dOut: the gradient of the block's output [B*T, C] → the gradient of its input, accumulated into
   * dOut in place (the residual stream's gradient passes through and each branch adds to it) and
   * returned. Writes the block's parameter gradients.
   */
  backward(dOut: Tensor): Tensor {
    const saved = this.#saved;
    if (!saved) throw new Error(`${this.name}: backward before forward`);
    this.#saved = undefined;
    const { rt } = this;
    const { a, x1, b, h, g } = saved;
    const dg = this.fcProj.backward(dOut)!; // [B*T, 4C]
    g.dispose();
    rt.ops.geluBackward(rt.onDevice, rt.s, h.ptr, dg.ptr, dg.ptr, h.size); // dh over dg
    h.dispose();
    const db = this.fc.backward(dg)!; // [B*T, C]
    dg.dispose();
    b.dispose();
    rt.ops.axpy(rt.onDevice, rt.s, 1, this.ln2.backward(db).ptr, dOut.ptr, dOut.size); // dx1 = dOut + LN2'(db)
    db.dispose();
    x1.dispose();
    const da = this.attn.backward(dOut);
    a.dispose();
    rt.ops.axpy(rt.onDevice, rt.s, 1, this.ln1.backward(da).ptr, dOut.ptr, dOut.size); // dx = dx1 + LN1'(Attn'(dx1))
    da.dispose();
    return dOut;
  }
}
