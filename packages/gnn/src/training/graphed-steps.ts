/**
 * The mlp's training steps captured into CUDA Graphs.
 * @module
 */
import { CudaGraph, type Stream } from '@gpumem/allocator-core';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import { trainerStream } from './train-common.js';

/**
 * The mlp's full training steps replayed as CUDA Graphs. A step reads its batch's indices at
 * perm + counter·batch, writes its loss and correct count to slot `counter` of fixed arrays and
 * advances the counter on the device, so every step is the same launch sequence with the same
 * arguments: `graphSteps` of them are captured into one graph, and the host launches a handful of
 * graphs per epoch with no copies around them. The weight gradients and updates run on a second
 * stream beside the chain of input gradients, which the graph keeps as parallel branches.
 */
export class GraphedSteps {
  /** The epoch's order, the step counter, and the per-step losses and correct counts (fixed addresses). */
  readonly perm: Tensor;
  readonly counter: Tensor;
  readonly losses: Tensor;
  readonly correct: Tensor;
  readonly side: Stream;
  /** Whether a step ran eagerly before the first capture. */
  warmedUp = false;
  readonly #graphs = new Map<number, { graph: CudaGraph; tensors: Tensor[] }>();

  constructor(
    private readonly rt: Runtime,
    nTrain: number,
    steps: number,
    private readonly graphSteps: number,
  ) {
    this.perm = rt.keep(rt.empty([nTrain], 'i32'));
    this.counter = rt.keep(rt.zeros([1], 'i32'));
    this.losses = rt.keep(rt.zeros([steps]));
    this.correct = rt.keep(rt.zeros([steps], 'i32'));
    this.side = trainerStream(rt.allocator.device, 'side');
    rt.bindWorkspace(this.side);
  }

  /** Writes the epoch's order and resets the counter to step 0; returns the order's tensor. */
  beginEpoch(order: Int32Array): Tensor {
    this.perm.write(order);
    this.rt.ops.fillI32(this.rt.onDevice, this.rt.s, this.counter.ptr, 1, 0);
    return this.perm;
  }

  /** Runs `graphSteps` steps, or one when fewer remain, with one graph launch; returns how many. */
  launch(remaining: number, step: () => void): number {
    let n = remaining >= this.graphSteps ? this.graphSteps : 1;
    let entry = this.#graphs.get(n) ?? this.#capture(n, step);
    if (!entry) {
      n = 1; // the pool handed the captured steps different blocks: one step per graph instead
      entry = this.#graphs.get(1) ?? this.#capture(1, step)!;
    }
    entry.graph.launch();
    return n;
  }

  /**
   * Captures `count` steps into one graph. Each step but the last frees its tensors when it ends
   * (in stream order, after all of its work, on the stream the next step allocates on), so the
   * pool hands every step the same blocks, and the last step's tensors stay allocated for the
   * graph's life. Undefined (and nothing kept) if a step got other addresses than the last one,
   * since the graph would then use memory it does not hold.
   */
  #capture(count: number, step: () => void): { graph: CudaGraph; tensors: Tensor[] } | undefined {
    const { rt } = this;
    const earlier: string[] = [];
    let kept: Tensor[] = [];
    const addresses = (ts: Tensor[]) => ts.map((t) => `${t.ptr}+${t.bytes}`).join(',');
    let graph: CudaGraph;
    try {
      graph = CudaGraph.capture(rt.stream, () => {
        for (let k = 0; k < count; k++) {
          const made = rt.collect(step);
          if (k + 1 === count) {
            kept = made;
          } else {
            earlier.push(addresses(made));
            for (const t of made) t.dispose();
          }
        }
      });
    } catch (e) {
      for (const t of kept) t.dispose();
      throw e;
    }
    const last = addresses(kept);
    if (!earlier.every((a) => a === last)) {
      graph.destroy();
      for (const t of kept) t.dispose();
      return undefined;
    }
    const entry = { graph, tensors: kept };
    this.#graphs.set(count, entry);
    return entry;
  }

  /** Destroys the graphs, then frees their memory and the fixed tensors (the stream must be idle). */
  dispose(): void {
    for (const { graph, tensors } of this.#graphs.values()) {
      graph.destroy();
      for (const t of tensors) t.dispose();
    }
    this.#graphs.clear();
    for (const t of [this.perm, this.counter, this.losses, this.correct]) t.dispose();
    this.side.synchronize();
  }
}
