/**
 * Layers with explicit forward and backward side by side (no autograd engine). A layer's forward
 * saves what its backward needs; backward takes the gradient of its output, accumulates into its
 * parameters' gradients and returns the gradient of its input. Shapes are in comments.
 * @module
 */
import type { Runtime } from './runtime.js';
import type { Tensor } from './tensor.js';

/** A trainable tensor and its gradient (same shape): views into a ParameterSet's buffers. */
export interface Parameter {
  readonly name: string;
  readonly value: Tensor;
  readonly grad: Tensor;
}

/**
 * All of a model's parameters in one buffer and their gradients in another, so that an optimiser
 * step is one kernel launch, whatever the number of layers. Gradients are written (not
 * accumulated) by each backward, so there is no zeroing either.
 */
export class ParameterSet {
  readonly values: Tensor;
  readonly grads: Tensor;
  readonly #byName = new Map<string, Parameter>();

  constructor(rt: Runtime, specs: ReadonlyArray<{ name: string; shape: readonly number[] }>) {
    const total = specs.reduce((a, p) => a + p.shape.reduce((x, y) => x * y, 1), 0);
    this.values = rt.keep(rt.empty([total]));
    this.grads = rt.keep(rt.zeros([total]));
    let offset = 0;
    for (const { name, shape } of specs) {
      const size = shape.reduce((x, y) => x * y, 1);
      this.#byName.set(name, { name, value: this.values.view(offset, shape), grad: this.grads.view(offset, shape) });
      offset += size;
    }
  }

  get(name: string): Parameter {
    const p = this.#byName.get(name);
    if (!p) throw new Error(`no parameter named ${name}`);
    return p;
  }

  get list(): Parameter[] {
    return [...this.#byName.values()];
  }

  get size(): number {
    return this.values.size;
  }

  dispose(): void {
    this.values.dispose();
    this.grads.dispose();
  }
}

/**
 * What a dense layer holds: a weight [out, in] and a bias [out] in a ParameterSet, named
 * `<name>.weight` and `<name>.bias`. {@link Linear} and GcnConv are dense layers.
 */
export abstract class DenseLayer {
  readonly weight: Parameter;
  readonly bias: Parameter;

  /** The parameters the layer needs, for its ParameterSet. */
  static parameterSpecs(name: string, inFeatures: number, outFeatures: number) {
    return [
      { name: `${name}.weight`, shape: [outFeatures, inFeatures] },
      { name: `${name}.bias`, shape: [outFeatures] },
    ];
  }

  constructor(
    protected readonly rt: Runtime,
    readonly name: string,
    readonly inFeatures: number,
    readonly outFeatures: number,
    params: ParameterSet,
  ) {
    this.weight = params.get(`${name}.weight`);
    this.bias = params.get(`${name}.bias`);
  }

  get parameters(): Parameter[] {
    return [this.weight, this.bias];
  }
}

/** PyTorch's default init for Linear: U(-1/sqrt(fanIn), 1/sqrt(fanIn)) for weight and bias. */
function initUniform(rt: Runtime, p: Parameter, fanIn: number, seed: number, offset: number): void {
  const bound = 1 / Math.sqrt(fanIn);
  rt.ops.randomUniform(rt.onDevice, rt.s, p.value.ptr, p.value.size, -bound, bound, seed, offset);
}

/**
 * y = x Wᵀ + b, or with `relu`, y = max(x Wᵀ + b, 0) with the ReLU fused into the bias add (and,
 * backward, into the bias gradient): two kernels fewer per layer and step.  W: [out, in], b: [out].
 */
export class Linear extends DenseLayer {
  #x: Tensor | undefined; // [rows, in], saved by forward
  #y: Tensor | undefined; // [rows, out], the ReLU's output, saved by forward when relu

  constructor(
    rt: Runtime,
    name: string,
    inFeatures: number,
    outFeatures: number,
    params: ParameterSet,
    readonly relu = false,
  ) {
    super(rt, name, inFeatures, outFeatures, params);
  }

  init(seed: number, offset: number): void {
    initUniform(this.rt, this.weight, this.inFeatures, seed, offset);
    initUniform(this.rt, this.bias, this.inFeatures, seed, offset + this.weight.value.size);
  }

  /** x: [rows, in] → [rows, out]. */
  forward(x: Tensor): Tensor {
    const rows = x.shape[0]!;
    const y = this.rt.empty([rows, this.outFeatures]);
    this.rt.ops.gemm(
      this.rt.onDevice,
      this.rt.s,
      false,
      true,
      rows,
      this.outFeatures,
      this.inFeatures,
      1,
      x.ptr,
      this.weight.value.ptr,
      0,
      y.ptr,
    );
    if (this.relu) {
      this.rt.ops.addBiasRelu(this.rt.onDevice, this.rt.s, y.ptr, this.bias.value.ptr, rows, this.outFeatures);
      this.#y = y;
    } else {
      this.rt.ops.addBias(this.rt.onDevice, this.rt.s, y.ptr, this.bias.value.ptr, rows, this.outFeatures);
    }
    this.#x = x;
    return y;
  }

  /**
   * dy: [rows, out] → dx: [rows, in] (or nothing when needInputGrad is false); writes dW, db.
   * With relu, dy is the gradient of the ReLU's output and is masked in place. biasGradDone: db
   * was already written (by softmaxCrossEntropyBiasGrad, for the layer that makes the logits).
   */
  backward(dy: Tensor, needInputGrad = true, biasGradDone = false): Tensor | undefined {
    if (!biasGradDone) this.biasGrad(dy);
    this.weightGrad(dy);
    const dx = needInputGrad ? this.inputGrad(dy) : undefined;
    this.release();
    return dx;
  }

  /** db = column sums of dy; with relu, dy is first masked in place by the saved output > 0. */
  biasGrad(dy: Tensor): void {
    const { rt } = this;
    const rows = dy.shape[0]!;
    if (this.relu) {
      const y = this.#y;
      if (!y) throw new Error(`${this.name}: backward before forward`);
      rt.ops.reluBiasGrad(rt.onDevice, rt.s, y.ptr, dy.ptr, this.bias.grad.ptr, rows, this.outFeatures);
    } else {
      rt.ops.biasGrad(rt.onDevice, rt.s, dy.ptr, this.bias.grad.ptr, rows, this.outFeatures, false);
    }
  }

  /** dW[out,in] = dyᵀ[out,rows] x[rows,in], queued on `stream` (default: the runtime's stream). */
  weightGrad(dy: Tensor, stream: number = this.rt.s): void {
    const x = this.#x;
    if (!x) throw new Error(`${this.name}: backward before forward`);
    const { rt } = this;
    rt.ops.gemm(
      rt.onDevice,
      stream,
      true,
      false,
      this.outFeatures,
      this.inFeatures,
      dy.shape[0]!,
      1,
      dy.ptr,
      x.ptr,
      0,
      this.weight.grad.ptr,
    );
  }

  /** dx[rows,in] = dy[rows,out] W[out,in], in a new tensor. */
  inputGrad(dy: Tensor): Tensor {
    const { rt } = this;
    const rows = dy.shape[0]!;
    const dx = rt.empty([rows, this.inFeatures]);
    rt.ops.gemm(rt.onDevice, rt.s, false, false, rows, this.inFeatures, this.outFeatures, 1, dy.ptr, this.weight.value.ptr, 0, dx.ptr);
    return dx;
  }

  /** Forgets what forward saved for backward (the tensors stay with their owners). */
  release(): void {
    this.#x = undefined;
    this.#y = undefined;
  }

  /**
   * y = x Wᵀ + b (with `relu`, max(·, 0)) without saving anything for backward: for callers that
   * keep (or drop and recompute) the activations themselves, with {@link Linear.backwardFrom}.
   * The same kernels as forward, so the same values.
   */
  apply(x: Tensor): Tensor {
    const y = this.forward(x);
    this.release();
    return y;
  }

  /**
   * backward from explicit saved tensors instead of what forward saved: `x` is the layer's input
   * and `y` (with relu) its output, as a caller that manages the activations (activation
   * checkpointing, nano-batches) holds them. dy is masked in place (relu), as in backward.
   * With `accumulate`, dW and db are added to the gradients (the gemm's beta = 1, the bias
   * gradient's accumulate flag; the ReLU mask then runs as its own kernel before the bias
   * gradient) instead of written, so that several slices of a batch sum their gradients. Without
   * it, the same kernels as backward in the same order: the same results, bit for bit.
   */
  backwardFrom(
    x: Tensor,
    y: Tensor | undefined,
    dy: Tensor,
    options: { needInputGrad?: boolean; biasGradDone?: boolean; accumulate?: boolean } = {},
  ): Tensor | undefined {
    const { rt } = this;
    const { needInputGrad = true, biasGradDone = false, accumulate = false } = options;
    const rows = dy.shape[0]!;
    if (!biasGradDone) {
      if (this.relu) {
        if (!y) throw new Error(`${this.name}: backwardFrom needs the layer's output (its ReLU mask)`);
        if (accumulate) {
          rt.ops.reluBackward(rt.onDevice, rt.s, y.ptr, dy.ptr, dy.ptr, dy.size);
          rt.ops.biasGrad(rt.onDevice, rt.s, dy.ptr, this.bias.grad.ptr, rows, this.outFeatures, true);
        } else {
          rt.ops.reluBiasGrad(rt.onDevice, rt.s, y.ptr, dy.ptr, this.bias.grad.ptr, rows, this.outFeatures);
        }
      } else {
        rt.ops.biasGrad(rt.onDevice, rt.s, dy.ptr, this.bias.grad.ptr, rows, this.outFeatures, accumulate);
      }
    }
    rt.ops.gemm(
      rt.onDevice,
      rt.s,
      true,
      false,
      this.outFeatures,
      this.inFeatures,
      rows,
      1,
      dy.ptr,
      x.ptr,
      accumulate ? 1 : 0,
      this.weight.grad.ptr,
    );
    return needInputGrad ? this.inputGrad(dy) : undefined;
  }
}

/** y = max(x, 0), in a new tensor; backward masks by y > 0. */
export class ReLU {
  #y: Tensor | undefined;
  constructor(private readonly rt: Runtime) {}

  forward(x: Tensor): Tensor {
    const y = this.rt.empty(x.shape);
    this.rt.ops.relu(this.rt.onDevice, this.rt.s, x.ptr, y.ptr, x.size);
    this.#y = y;
    return y;
  }

  /** In place on dy. */
  backward(dy: Tensor): Tensor {
    const y = this.#y;
    if (!y) throw new Error('relu: backward before forward');
    this.rt.ops.reluBackward(this.rt.onDevice, this.rt.s, y.ptr, dy.ptr, dy.ptr, dy.size);
    this.#y = undefined;
    return dy;
  }
}

/** Throws a RangeError naming `name` unless p is a dropout probability, in [0, 1). */
export function checkDropoutProbability(p: number, name: string): void {
  if (!(p >= 0 && p < 1)) throw new RangeError(`Expected dropout probability in [0, 1) for ${name} but received ${p}`);
}

/** Inverted dropout with a seeded counter-based RNG: the same (seed, offset) drops the same units. */
export class Dropout {
  #mask: Tensor | undefined;
  constructor(
    private readonly rt: Runtime,
    readonly p: number,
  ) {
    checkDropoutProbability(p, 'p');
  }

  forward(x: Tensor, seed: number, offset: number, training: boolean): Tensor {
    if (!training || this.p === 0) return x;
    const y = this.rt.empty(x.shape);
    const mask = this.rt.empty(x.shape, 'u8');
    this.rt.ops.dropout(this.rt.onDevice, this.rt.s, x.ptr, y.ptr, mask.ptr, x.size, this.p, seed, offset);
    this.#mask = mask;
    return y;
  }

  /** In place on dy. */
  backward(dy: Tensor): Tensor {
    const mask = this.#mask;
    if (!mask) return dy;
    this.rt.ops.dropoutBackward(this.rt.onDevice, this.rt.s, dy.ptr, mask.ptr, dy.ptr, dy.size, this.p);
    this.#mask = undefined;
    return dy;
  }
}

/**
 * Softmax cross-entropy on the first `rows` rows of logits (a node classification mask that is a
 * prefix, or a whole batch). Returns dLogits for all rows (zero outside the mask); writes the mean
 * loss and the number of correct predictions to the given device scalars.
 */
export function softmaxCrossEntropy(
  rt: Runtime,
  logits: Tensor, // [N, C]
  labels: Tensor, // i32 [N]
  rows: number,
  lossOut: number, // f32 scalar address
  correctOut: number, // i32 scalar address
): Tensor {
  const [n, c] = [logits.shape[0]!, logits.shape[1]!];
  const dLogits = rows < n ? rt.zeros([n, c]) : rt.empty([n, c]);
  rt.ops.softmaxCrossEntropy(rt.onDevice, rt.s, logits.ptr, labels.ptr, 0, rows, rows, c, dLogits.ptr, lossOut, correctOut);
  return dLogits;
}

/**
 * softmaxCrossEntropy over all rows of a batch fused with the bias gradient of the layer that made
 * the logits (dBias = column sums of dLogits): one launch instead of two, bit-identical to
 * softmaxCrossEntropy followed by that layer's biasGrad. The mean loss and correct count go to
 * lossOut[k] and correctOut[k], where k is 0, or the value of the i32 step counter at `step` (a
 * device address, 0 for none) when the launch runs.
 */
export function softmaxCrossEntropyBiasGrad(
  rt: Runtime,
  logits: Tensor, // [N, C]
  labels: Tensor, // i32 [N]
  dBias: Tensor, // [C]
  lossOut: number, // f32 array address
  correctOut: number, // i32 array address
  step = 0,
): Tensor {
  const [n, c] = [logits.shape[0]!, logits.shape[1]!];
  if (dBias.size !== c) throw new RangeError(`Expected ${c} elements for dBias but received ${dBias.size}`);
  const dLogits = rt.empty([n, c]);
  rt.ops.softmaxCrossEntropyBiasGrad(rt.onDevice, rt.s, logits.ptr, labels.ptr, n, c, dLogits.ptr, dBias.ptr, lossOut, correctOut, step);
  return dLogits;
}

/** The optimiser interface: one update of every parameter from its gradient. */
export interface Optimizer {
  step(): void;
  /** Frees optimiser state. */
  dispose(): void;
}

/** w -= lr · g over the whole ParameterSet: one launch. */
export class SGD implements Optimizer {
  constructor(
    private readonly rt: Runtime,
    private readonly params: ParameterSet,
    readonly lr: number,
  ) {}

  step(): void {
    this.rt.ops.sgd(this.rt.onDevice, this.rt.s, this.params.values.ptr, this.params.grads.ptr, this.params.size, this.lr);
  }

  /**
   * The same update over `count` parameters from element `offset` of the ParameterSet, queued on
   * `stream` (default: the runtime's). The update is elementwise, so updating the set range by
   * range gives exactly what step() gives.
   */
  stepRange(offset: number, count: number, stream: number = this.rt.s): void {
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(count) || offset < 0 || count < 0 || offset + count > this.params.size) {
      throw new RangeError(`Expected a range inside the ${this.params.size} parameters but received offset ${offset}, count ${count}`);
    }
    this.rt.ops.sgd(this.rt.onDevice, stream, this.params.values.ptr + 4 * offset, this.params.grads.ptr + 4 * offset, count, this.lr);
  }

  dispose(): void {}
}

/** Adam (PyTorch's form) over the whole ParameterSet: one launch. */
export class Adam implements Optimizer {
  #step = 0;
  readonly #m: Tensor;
  readonly #v: Tensor;

  constructor(
    private readonly rt: Runtime,
    private readonly params: ParameterSet,
    readonly lr: number,
    readonly beta1 = 0.9,
    readonly beta2 = 0.999,
    readonly eps = 1e-8,
  ) {
    this.#m = rt.keep(rt.zeros([params.size]));
    this.#v = rt.keep(rt.zeros([params.size]));
  }

  step(): void {
    this.#step++;
    const { rt, params } = this;
    rt.ops.adam(
      rt.onDevice,
      rt.s,
      params.values.ptr,
      params.grads.ptr,
      this.#m.ptr,
      this.#v.ptr,
      params.size,
      this.lr,
      this.beta1,
      this.beta2,
      this.eps,
      this.#step,
    );
  }

  dispose(): void {
    this.#m.dispose();
    this.#v.dispose();
  }
}
