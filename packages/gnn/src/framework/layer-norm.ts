/**
 * Layer normalisation over the last dimension, forward and backward side by side: forward saves its
 * input (a reference: the caller owns it and keeps it until backward) and the rows' mean and rstd
 * (owned here); backward writes the input's gradient over the output's and frees mean and rstd.
 * @module
 */
import type { Parameter, ParameterSet } from './nn.js';
import type { Runtime } from './runtime.js';
import type { Tensor } from './tensor.js';

export class LayerNorm {
  readonly weight: Parameter; // gamma [cols]
  readonly bias: Parameter; // beta [cols]
  #saved: { x: Tensor; mean: Tensor; rstd: Tensor } | undefined; // x [rows, cols]; mean, rstd [rows]

  /** The parameters a LayerNorm needs, for its ParameterSet. */
  static parameterSpecs(name: string, cols: number) {
    return [
      { name: `${name}.weight`, shape: [cols] },
      { name: `${name}.bias`, shape: [cols] },
    ];
  }

  constructor(
    private readonly rt: Runtime,
    readonly name: string,
    readonly cols: number,
    params: ParameterSet,
    readonly eps = 1e-5,
  ) {
    this.weight = params.get(`${name}.weight`);
    this.bias = params.get(`${name}.bias`);
  }

  /** gamma = 1, beta = 0 (PyTorch's init). */
  init(): void {
    this.rt.ops.fillF32(this.rt.onDevice, this.rt.s, this.weight.value.ptr, this.cols, 1);
    this.rt.ops.fillF32(this.rt.onDevice, this.rt.s, this.bias.value.ptr, this.cols, 0);
  }

  /** x: [rows, cols] → y [rows, cols], a new tensor. `save` false (evaluation): nothing is kept for backward. */
  forward(x: Tensor, save = true): Tensor {
    const { rt } = this;
    const rows = x.shape[0]!;
    const y = rt.empty([rows, this.cols]);
    const mean = rt.empty([rows]);
    const rstd = rt.empty([rows]);
    rt.ops.layerNorm(
      rt.onDevice,
      rt.s,
      x.ptr,
      this.weight.value.ptr,
      this.bias.value.ptr,
      y.ptr,
      mean.ptr,
      rstd.ptr,
      rows,
      this.cols,
      this.eps,
    );
    if (save) this.#saved = { x, mean, rstd };
    else {
      mean.dispose();
      rstd.dispose();
    }
    return y;
  }

  /** dy: [rows, cols] → dx, written over dy (returned); writes dGamma and dBeta; frees the saved mean and rstd. */
  backward(dy: Tensor): Tensor {
    const saved = this.#saved;
    if (!saved) throw new Error(`${this.name}: backward before forward`);
    const { rt } = this;
    const rows = dy.shape[0]!;
    rt.ops.layerNormBackward(
      rt.onDevice,
      rt.s,
      dy.ptr,
      saved.x.ptr,
      this.weight.value.ptr,
      saved.mean.ptr,
      saved.rstd.ptr,
      dy.ptr,
      this.weight.grad.ptr,
      this.bias.grad.ptr,
      rows,
      this.cols,
      false,
    );
    saved.mean.dispose();
    saved.rstd.dispose();
    this.#saved = undefined;
    return dy;
  }
}
