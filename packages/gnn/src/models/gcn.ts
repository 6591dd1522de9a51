/**
 * A 2-layer GCN: conv → ReLU → dropout → conv. A conv is h = x Wᵀ, out = A·h + b, where A is the
 * graph's (normalised) adjacency, applied either as a CSR sparse-dense product ('spmm') or the
 * seed's way ('scatter': gather an E x hidden message tensor, weight it, index_add it at targets).
 * Both give the same result; 'scatter' exists to compare allocators under its large temporaries.
 * The first conv reads the fixed input features only, so it may instead be taken as
 * (A·x)·W1ᵀ + b1 with A·x aggregated once for the run (InputAggregation 'once').
 * @module
 */
import { checkDropoutProbability, DenseLayer, ParameterSet, type Parameter } from '../framework/nn.js';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import type { Csr, Graph } from '../datasets/graphs.js';

export type Aggregation = 'spmm' | 'scatter';

/**
 * When the first layer's aggregation runs: 'every-epoch' computes A·(x·W1ᵀ) in every forward (the
 * seed's plan: x·W1ᵀ and A·(x·W1ᵀ) are two N x hidden tensors, and the scatter form gathers its
 * E x hidden messages); 'once' aggregates the input features A·x once (they never change, and
 * nothing before the first layer, no dropout, touches them) and computes (A·x)·W1ᵀ per forward,
 * as the partitioned GCN does. Equal up to float reassociation.
 */
export type InputAggregation = 'once' | 'every-epoch';

/** out = A·h. Runs in its own scope so that the scatter path's messages are freed at once. */
function aggregate(rt: Runtime, graph: Graph, h: Tensor, aggregation: Aggregation, transpose: boolean): Tensor {
  const [n, width] = [graph.numNodes, h.shape[1]!];
  const e = graph.numEdges;
  return rt.scope(() => {
    if (aggregation === 'spmm') {
      const a: Csr = transpose ? graph.csrT : graph.csr;
      const out = rt.empty([n, width]);
      rt.ops.spmm(rt.onDevice, rt.s, a.rowptr.ptr, a.col.ptr, a.val.ptr, h.ptr, out.ptr, n, width);
      return out;
    }
    // forward: messages flow src -> dst; the transpose carries gradients dst -> src
    const from = transpose ? graph.dst : graph.src;
    const to = transpose ? graph.src : graph.dst;
    const messages = rt.empty([e, width]); // [E, H]: the seed's big temporary
    rt.ops.gatherRows(rt.onDevice, rt.s, h.ptr, from.ptr, messages.ptr, e, width);
    rt.ops.scaleRows(rt.onDevice, rt.s, messages.ptr, graph.weight.ptr, messages.ptr, e, width);
    const out = rt.zeros([n, width]);
    rt.ops.scatterAddRows(rt.onDevice, rt.s, messages.ptr, to.ptr, out.ptr, e, width);
    return out;
  });
}

/**
 * The two convs of the 2-layer GCN (inputs → hidden → classes) in one parameter set, initialised
 * from `seed` as every GCN model here is (conv2's random stream starts where conv1's ends), so that
 * the plain, blocked and partitioned models hold the same parameters.
 */
export function gcnLayers(
  rt: Runtime,
  inputs: number,
  hidden: number,
  classes: number,
  seed: number,
): { params: ParameterSet; conv1: GcnConv; conv2: GcnConv } {
  const params = new ParameterSet(rt, [
    ...GcnConv.parameterSpecs('conv1', inputs, hidden),
    ...GcnConv.parameterSpecs('conv2', hidden, classes),
  ]);
  const conv1 = new GcnConv(rt, 'conv1', inputs, hidden, params, seed, 0);
  const conv2 = new GcnConv(rt, 'conv2', hidden, classes, params, seed, inputs * hidden);
  return { params, conv1, conv2 };
}

export class GcnConv extends DenseLayer {
  #x: Tensor | undefined;

  constructor(rt: Runtime, name: string, inFeatures: number, outFeatures: number, params: ParameterSet, seed: number, offset: number) {
    super(rt, name, inFeatures, outFeatures, params);
    // Glorot uniform weight, zero bias (as GCNConv)
    const bound = Math.sqrt(6 / (inFeatures + outFeatures));
    rt.ops.randomUniform(rt.onDevice, rt.s, this.weight.value.ptr, this.weight.value.size, -bound, bound, seed, offset);
    rt.ops.fillF32(rt.onDevice, rt.s, this.bias.value.ptr, outFeatures, 0);
  }

  /** x: [N, in] → [N, out]. */
  forward(x: Tensor, graph: Graph, aggregation: Aggregation): Tensor {
    const { rt } = this;
    const n = x.shape[0]!;
    const out = rt.scope(() => {
      const h = rt.empty([n, this.outFeatures]); // freed once aggregated
      rt.ops.gemm(rt.onDevice, rt.s, false, true, n, this.outFeatures, this.inFeatures, 1, x.ptr, this.weight.value.ptr, 0, h.ptr);
      return aggregate(rt, graph, h, aggregation, false);
    });
    rt.ops.addBias(rt.onDevice, rt.s, out.ptr, this.bias.value.ptr, n, this.outFeatures);
    this.#x = x;
    return out;
  }

  /** The conv over an input aggregated already (ax = A·x, [N, in]): ax·Wᵀ + b, [N, out]. */
  forwardAggregated(ax: Tensor): Tensor {
    const { rt } = this;
    const n = ax.shape[0]!;
    const out = rt.empty([n, this.outFeatures]);
    rt.ops.gemm(rt.onDevice, rt.s, false, true, n, this.outFeatures, this.inFeatures, 1, ax.ptr, this.weight.value.ptr, 0, out.ptr);
    rt.ops.addBias(rt.onDevice, rt.s, out.ptr, this.bias.value.ptr, n, this.outFeatures);
    this.#x = ax;
    return out;
  }

  /**
   * Backward of forwardAggregated: dW = dOutᵀ·(A·x) and db; no input gradient (the input is the
   * fixed features). With consume, dOut is freed once read.
   */
  backwardAggregated(dOut: Tensor, consume = false): void {
    const { rt } = this;
    const ax = this.#x;
    if (!ax) throw new Error(`${this.name}: backward before forward`);
    const n = dOut.shape[0]!;
    rt.ops.biasGrad(rt.onDevice, rt.s, dOut.ptr, this.bias.grad.ptr, n, this.outFeatures, false);
    rt.ops.gemm(rt.onDevice, rt.s, true, false, this.outFeatures, this.inFeatures, n, 1, dOut.ptr, ax.ptr, 0, this.weight.grad.ptr);
    this.#x = undefined;
    if (consume) dOut.dispose();
  }

  /**
   * dOut: [N, out] → dx [N, in] when needInputGrad; writes dW and db. With consume, dOut is
   * freed as soon as it has been aggregated (the caller hands it over).
   */
  backward(dOut: Tensor, graph: Graph, aggregation: Aggregation, needInputGrad: boolean, consume = false): Tensor | undefined {
    const { rt } = this;
    const x = this.#x;
    if (!x) throw new Error(`${this.name}: backward before forward`);
    const n = dOut.shape[0]!;
    rt.ops.biasGrad(rt.onDevice, rt.s, dOut.ptr, this.bias.grad.ptr, n, this.outFeatures, false);
    this.#x = undefined;
    return rt.scope(() => {
      const dH = aggregate(rt, graph, dOut, aggregation, true); // [N, out]
      if (consume) dOut.dispose();
      rt.ops.gemm(rt.onDevice, rt.s, true, false, this.outFeatures, this.inFeatures, n, 1, dH.ptr, x.ptr, 0, this.weight.grad.ptr);
      if (!needInputGrad) return undefined;
      const dx = rt.empty([n, this.inFeatures]);
      rt.ops.gemm(rt.onDevice, rt.s, false, false, n, this.inFeatures, this.outFeatures, 1, dH.ptr, this.weight.value.ptr, 0, dx.ptr);
      return dx;
    });
  }
}

/**
 * The 2-layer GCN, planned for memory: at N nodes and hidden width H, one activation is N·H floats
 * (2 GB at 2M x 256), so a step keeps at most two of them live. ReLU and dropout work in place on
 * conv1's output a1 = relu(z)·keep/(1-p). Backward needs no dropout mask: a1 > 0 exactly where
 * both ReLU and the mask let a unit through, so ∂a1/∂z = (a1 > 0)/(1-p), a ReLU backward on a1
 * and one scale. The mask lives only inside forward, after h is freed. Every activation and
 * gradient is freed as soon as nothing needs it. With the input aggregated every epoch:
 *   forward peak:  x, h = x·W1ᵀ (freed after aggregation), a1 = A·h
 *   backward peak: a1, d = ∂a1 (a1 freed once d is masked), then d and A'·d (d freed once aggregated)
 * With the input aggregated once (aggregateInput, before the first forward; A·x then stands where
 * x stood, the caller may free x):
 *   forward peak:  A·x, a1 = (A·x)·W1ᵀ and its dropout mask
 *   backward peak: a1, d = ∂a1 (a1 freed once d is masked); dW1 = dᵀ·(A·x) needs nothing more
 */
export class Gcn {
  readonly conv1: GcnConv;
  readonly conv2: GcnConv;
  readonly params: ParameterSet;
  #a1: Tensor | undefined; // conv1's output after ReLU and dropout, [N, H]
  #dropped = false; // whether the last forward applied dropout
  #ax: Tensor | undefined; // inputAggregation 'once': A·x, [N, F], for the run

  constructor(
    private readonly rt: Runtime,
    inputs: number,
    readonly hidden: number,
    classes: number,
    readonly dropout: number,
    readonly aggregation: Aggregation,
    seed: number,
    /** Trainer-inserted prefetch: each pass's operands to the device before it runs. */
    private readonly layerPrefetch = false,
    /** 'once': aggregateInput() takes A·x before the first forward (see InputAggregation). */
    readonly inputAggregation: InputAggregation = 'every-epoch',
  ) {
    checkDropoutProbability(dropout, 'dropout');
    if (inputAggregation !== 'once' && inputAggregation !== 'every-epoch')
      throw new RangeError(`Expected 'once' or 'every-epoch' for inputAggregation but received '${String(inputAggregation)}'`);
    ({ params: this.params, conv1: this.conv1, conv2: this.conv2 } = gcnLayers(rt, inputs, hidden, classes, seed));
  }

  get parameters(): Parameter[] {
    return this.params.list;
  }

  /**
   * inputAggregation 'once': aggregates the graph's input features, A·x [N, F], kept for every
   * forward of the run (freed by dispose). Later forwards read A·x only, never the features.
   */
  aggregateInput(graph: Graph): void {
    const { rt } = this;
    if (this.inputAggregation !== 'once') throw new Error(`gcn: aggregateInput with inputAggregation '${this.inputAggregation}'`);
    if (graph.features.disposed) throw new Error('gcn: aggregateInput of a graph whose features were freed');
    this.#ax?.dispose();
    this.#ax = rt.tagged('features', () => rt.keep(aggregate(rt, graph, graph.features, this.aggregation, false)));
  }

  /** → logits [N, classes]. `dropoutOffset` picks this step's dropout mask. */
  forward(graph: Graph, training: boolean, seed: number, dropoutOffset: number): Tensor {
    const { rt } = this;
    let a1: Tensor;
    if (this.inputAggregation === 'once') {
      const ax = this.#ax;
      if (!ax) throw new Error('gcn: forward before aggregateInput (inputAggregation once)');
      if (this.layerPrefetch) rt.prefetchToDevice(graph.csr.rowptr, graph.csr.col, graph.csr.val, ax, this.params.values);
      a1 = this.conv1.forwardAggregated(ax);
    } else {
      if (this.layerPrefetch) rt.prefetchToDevice(graph.csr.rowptr, graph.csr.col, graph.csr.val, graph.features, this.params.values);
      a1 = this.conv1.forward(graph.features, graph, this.aggregation);
    }
    rt.ops.relu(rt.onDevice, rt.s, a1.ptr, a1.ptr, a1.size);
    this.#dropped = training && this.dropout > 0;
    if (this.#dropped) {
      rt.scope(() => {
        const mask = rt.empty(a1.shape, 'u8'); // not kept: backward reads the mask off a1
        rt.ops.dropout(rt.onDevice, rt.s, a1.ptr, a1.ptr, mask.ptr, a1.size, this.dropout, seed, dropoutOffset);
      });
    }
    this.#a1 = a1;
    return this.conv2.forward(a1, graph, this.aggregation);
  }

  /** Consumes dLogits and frees the step's activations as it goes. */
  backward(dLogits: Tensor, graph: Graph): void {
    const { rt } = this;
    const a1 = this.#a1;
    if (!a1) throw new Error('gcn: backward before forward');
    if (this.layerPrefetch) rt.prefetchToDevice(graph.csrT.rowptr, graph.csrT.col, graph.csrT.val);
    const d = this.conv2.backward(dLogits, graph, this.aggregation, true, true)!; // ∂a1, [N, H]
    rt.ops.reluBackward(rt.onDevice, rt.s, a1.ptr, d.ptr, d.ptr, d.size); // through ReLU and the dropout mask
    if (this.#dropped) rt.ops.scale(rt.onDevice, rt.s, 1 / (1 - this.dropout), d.ptr, d.ptr, d.size);
    a1.dispose();
    this.#a1 = undefined;
    if (this.inputAggregation === 'once') this.conv1.backwardAggregated(d, true);
    else this.conv1.backward(d, graph, this.aggregation, false, true);
  }

  dispose(): void {
    this.#ax?.dispose();
    this.#ax = undefined;
    this.params.dispose();
  }
}
