/**
 * MLP: a stack of Linear + ReLU, then a Linear to the classes.
 * @module
 */
import { Linear, ParameterSet, type Parameter, type SGD } from '../framework/nn.js';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';

export class Mlp {
  readonly layers: Linear[] = [];
  readonly params: ParameterSet;

  /**
   * sizes: [inputs, hidden..., classes], e.g. [784, 784, 784, 784, 784, 10]. Every hidden layer is
   * a Linear with its ReLU fused in.
   */
  constructor(
    private readonly rt: Runtime,
    readonly sizes: readonly number[],
    seed: number,
  ) {
    const layerSizes = sizes.slice(1).map((out, i) => [`fc${i + 1}`, sizes[i]!, out] as const);
    this.params = new ParameterSet(
      rt,
      layerSizes.flatMap(([name, i, o]) => Linear.parameterSpecs(name, i, o)),
    );
    let offset = 0;
    layerSizes.forEach(([name, inputs, outputs], i) => {
      const layer = new Linear(rt, name, inputs, outputs, this.params, i + 1 < layerSizes.length);
      layer.init(seed, offset);
      offset += layer.weight.value.size + layer.bias.value.size;
      this.layers.push(layer);
    });
  }

  get parameters(): Parameter[] {
    return this.params.list;
  }

  /** x: [rows, inputs] → logits [rows, classes]. */
  forward(x: Tensor): Tensor {
    return this.layers.reduce((h, layer) => layer.forward(h), x);
  }

  /** The last layer, which makes the logits. */
  get output(): Linear {
    return this.layers[this.layers.length - 1]!;
  }

  /**
   * Gradients of every parameter from dLogits [rows, classes]. outputBiasGradDone: the last
   * layer's bias gradient was already written (softmaxCrossEntropyBiasGrad).
   */
  backward(dLogits: Tensor, outputBiasGradDone = false): void {
    let d = dLogits;
    for (let i = this.layers.length - 1; i >= 0; i--) {
      const dx = this.layers[i]!.backward(d, i > 0, outputBiasGradDone && i === this.layers.length - 1);
      if (dx) d = dx;
    }
  }

  /**
   * backward(dLogits) and then sgd.step(), with the work that is off the critical path moved to the
   * stream `side`: the main stream runs the chain of input gradients (each layer's masked bias
   * gradient, then dx = dy W), while `side` computes each layer's weight gradient as soon as its dy
   * exists and updates the layer's parameters as soon as dx no longer needs W. The same kernels on
   * the same inputs as backward + step, so the results are bit-identical; only independent work
   * overlaps. The main stream waits for `side` before returning, so later work on it (and frees of
   * the step's tensors) is ordered after everything here. Inside a CUDA Graph capture the waits
   * become the graph's edges.
   */
  backwardAndStep(dLogits: Tensor, sgd: SGD, side: number, outputBiasGradDone = false): void {
    const { rt } = this;
    let d = dLogits;
    for (let i = this.layers.length - 1; i >= 0; i--) {
      const layer = this.layers[i]!;
      if (!(outputBiasGradDone && i === this.layers.length - 1)) layer.biasGrad(d);
      rt.ops.streamWait(rt.onDevice, side, rt.s); // dy (masked) and db exist
      layer.weightGrad(d, side);
      const dx = i > 0 ? layer.inputGrad(d) : undefined;
      if (dx) rt.ops.streamWait(rt.onDevice, side, rt.s); // W is no longer read
      const { offset, count } = this.#range(layer);
      sgd.stepRange(offset, count, side);
      layer.release();
      if (dx) d = dx;
    }
    rt.ops.streamWait(rt.onDevice, rt.s, side);
  }

  /** A layer's weight and bias: one contiguous range of the ParameterSet. */
  #range(layer: Linear): { offset: number; count: number } {
    const base = this.params.values.ptr;
    const { value: w } = layer.weight;
    const { value: b } = layer.bias;
    if (b.ptr !== w.ptr + 4 * w.size) throw new Error(`${layer.name}: weight and bias are not adjacent in the ParameterSet`);
    return { offset: (w.ptr - base) / 4, count: w.size + b.size };
  }

  /**
   * A training step's forward: x [rows, inputs] → logits, keeping for backward the inputs that
   * `plan` says (see {@link MlpStepPlan}) and freeing the others as soon as the next layer has
   * run. Returns the logits and the kept inputs (kept[i]: layer i's input, or undefined where it
   * was freed; kept[0] is x, which stays the caller's). Hand both to backwardTraining.
   */
  forwardTraining(x: Tensor, plan: MlpStepPlan): { logits: Tensor; kept: (Tensor | undefined)[] } {
    const { rt, layers } = this;
    const n = layers.length;
    const kept = new Array<Tensor | undefined>(n).fill(undefined);
    let h = x;
    for (let i = 0; i < n; i++) {
      const layer = layers[i]!;
      if (plan.prefetch) this.#prefetchForward(layer, h);
      const out = layer.apply(h);
      if (this.keepsInput(i, plan.checkpoint)) {
        kept[i] = h;
        // backward needs it only later: to the host meanwhile (a no-op where memory cannot move)
        if (plan.prefetch && i < n - 1) rt.prefetch(h, 'host');
      } else {
        h.dispose(); // i > 0: layer 0's input is always a checkpoint
      }
      h = out;
    }
    return { logits: h, kept };
  }

  /**
   * A training step's backward from forwardTraining's `kept` and dLogits [rows, classes], both
   * consumed: segment by segment from the last, the inputs a segment dropped are recomputed from
   * its checkpoint (the same kernels as forward, so the same values) before backward goes through
   * it, and every activation and gradient is freed as soon as no later layer needs it (a layer's
   * input once its weight gradient is queued and its output once its ReLU mask is, each incoming
   * gradient once the layer has used it). kept[0] (the caller's x) is left alone.
   * `accumulate`: add to the gradients instead of writing them (nano-batches after the first).
   * `outputBiasGradDone`: the last layer's bias gradient was written by the loss kernel.
   */
  backwardTraining(
    kept: (Tensor | undefined)[],
    dLogits: Tensor,
    plan: MlpStepPlan,
    options: { outputBiasGradDone?: boolean; accumulate?: boolean } = {},
  ): void {
    const { rt, layers } = this;
    const n = layers.length;
    if (kept.length !== n || !kept[0]) throw new Error('backwardTraining: expected what forwardTraining kept');
    let d = dLogits;
    for (let i = n - 1; i >= 0; i--) {
      const layer = layers[i]!;
      if (!kept[i]) this.#recompute(kept, i, plan);
      if (plan.prefetch && i > 0) {
        // one layer ahead: what layer i - 1 needs first (its kept input, or its segment's
        // checkpoint to recompute from) comes back while layer i's backward runs
        const next = kept[i - 1] ?? kept[this.segmentStart(i - 1, plan.checkpoint)];
        if (next) rt.prefetch(next, 'device');
      }
      const dx = layer.backwardFrom(kept[i]!, layer.relu ? kept[i + 1] : undefined, d, {
        needInputGrad: i > 0,
        biasGradDone: options.outputBiasGradDone === true && i === n - 1,
        accumulate: options.accumulate === true,
      });
      d.dispose();
      if (i + 1 < n) {
        kept[i + 1]!.dispose(); // layer i's output: its ReLU mask was its last use
        kept[i + 1] = undefined;
      }
      if (dx) d = dx;
    }
  }

  /**
   * Whether a training forward keeps layer i's input for backward: every input with checkpoint 0
   * (off); else the checkpoints (layers 0, M, 2M, ...) and the inputs of the last segment, which
   * backward reaches first, so recomputing them would cost time and save no memory at the peak.
   */
  keepsInput(i: number, checkpoint: number): boolean {
    if (checkpoint === 0 || i % checkpoint === 0) return true;
    return i > this.segmentStart(this.layers.length - 1, checkpoint);
  }

  /** The first layer of the checkpoint segment that holds layer i (0 when checkpointing is off). */
  segmentStart(i: number, checkpoint: number): number {
    return checkpoint === 0 ? 0 : checkpoint * Math.floor(i / checkpoint);
  }

  /** Recomputes the inputs of layer i's segment after its checkpoint, up to layer i's own. */
  #recompute(kept: (Tensor | undefined)[], i: number, plan: MlpStepPlan): void {
    const a = this.segmentStart(i, plan.checkpoint);
    let h = kept[a];
    if (!h) throw new Error(`${this.layers[i]!.name}: its checkpoint (layer ${a}'s input) was freed`);
    for (let j = a; j < i; j++) {
      if (!kept[j + 1]) {
        const layer = this.layers[j]!;
        if (plan.prefetch) this.#prefetchForward(layer, h);
        kept[j + 1] = layer.apply(h);
      }
      h = kept[j + 1]!;
    }
  }

  /** Before a layer's forward: its parameters and its input to the device. */
  #prefetchForward(layer: Linear, input: Tensor): void {
    this.rt.prefetchToDevice(layer.weight.value, layer.bias.value, input);
  }

  /**
   * The peak activation memory of one training step (forwardTraining, the loss, backwardTraining)
   * by the formula of the notes on activation checkpointing, for an mlp whose layers all take
   * inputs of the same width (hidden = the 784 pixels of MNIST), with `rows` the rows of a batch
   * (of a nano-batch: the largest slice's).
   *
   * - X, a layer's input (the checkpoint): rows · width · 4 bytes.
   * - Y, what a layer's forward adds beside its output: 0 here, since the bias add and the ReLU are
   *   fused into the product's output in place (addBiasRelu), so no pre-activation exists.
   * - N: the Linear layers (the hidden ones and the output layer), each with an X-sized input.
   * - no checkpointing: (X + Y) · N; checkpoint every layer: X · N + Y; every M layers:
   *   X · ⌈N/M⌉ + X · (M − 1) + Y · M (⌈N/M⌉ checkpoints, the M − 1 recomputed inputs of one
   *   segment and its intermediates).
   * - plus a constant the notes leave out, 2X: backward holds a layer's incoming gradient (dy) and
   *   the input gradient it makes (dx), both rows × width, at the peak. The logits, their gradient
   *   and the labels (rows × classes, rows) are freed before that peak and do not count.
   */
  static activationFormula(shape: { rows: number; width: number; layers: number; checkpoint: number }): {
    X: number;
    Y: number;
    notes: number;
    constant: number;
    total: number;
  } {
    const { rows, width, layers: n, checkpoint: m } = shape;
    const X = rows * width * 4;
    const Y = 0;
    const notes = m === 0 ? (X + Y) * n : m === 1 ? X * n + Y : X * Math.ceil(n / m) + X * (m - 1) + Y * m;
    const constant = 2 * X;
    return { X, Y, notes, constant, total: notes + constant };
  }

  dispose(): void {
    this.params.dispose();
  }
}

/** How a training step of the mlp keeps its activations (train()'s checkpoint and layerPrefetch). */
export interface MlpStepPlan {
  /**
   * 0: keep every layer's input for backward. M ≥ 1: keep the inputs of layers 0, M, 2M, ... (and
   * of the last segment), recompute the rest segment by segment in backward.
   */
  checkpoint: number;
  /**
   * Trainer-inserted prefetch: each layer's weight, bias and input to the device before its
   * forward, every kept input but the last layer's to the host after it, and each back to the
   * device one layer ahead of backward's use.
   */
  prefetch: boolean;
}
