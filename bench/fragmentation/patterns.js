// The fragmentation patterns, as gpumem allocation traces (the events of packages/trace's JSONL
// form). Deterministic: the same trace every time. See README.md for what each reproduces.
import { seededRandom } from '@gpumem/allocator-core/tools';

const MiB = 2 ** 20;

// Builds events with unique pointers and increasing times.
class TraceBuilder {
  constructor() {
    this.events = [];
    this.nextPtr = 0x10000000;
    this.timeNs = 0;
  }
  alloc(bytes, stream = 0, tag = 0) {
    const ptr = this.nextPtr;
    this.nextPtr += 0x1000; // only an identity: replay maps pointers to slots
    this.#push({ action: 'alloc', ptr, bytes, stream, tag });
    return { ptr, bytes, stream };
  }
  free(block, stream = block.stream, tag = 0) {
    this.#push({ action: 'free', ptr: block.ptr, bytes: block.bytes, stream, tag });
  }
  #push(e) {
    this.timeNs += 1000;
    this.events.push({ timeNs: this.timeNs, ...e });
  }
}

/**
 * (a) The cycle: each of 100 cycles keeps a 48 MiB block and allocates then frees a temporary of
 * 128 MiB + 4 MiB * k. A segment cache carves each kept block from the last temporary's segment and
 * needs a new, larger segment for the next temporary (PyTorch's default allocator: 6.1x the peak).
 */
export function cyclePattern({ cycles = 100 } = {}) {
  const t = new TraceBuilder();
  const kept = [];
  for (let k = 0; k < cycles; k++) {
    kept.push(t.alloc(48 * MiB));
    t.free(t.alloc(128 * MiB + 4 * MiB * k));
  }
  for (const b of kept) t.free(b);
  return {
    header: {
      source: 'bench/fragmentation cycle',
      workload: { pattern: 'cycle', cycles, keptBytes: 48 * MiB, temporaryBytes: '128 MiB + 4 MiB * k' },
    },
    events: t.events,
  };
}

/**
 * (b) Two streams taking turns (rapidsai/rmm#2039): a producer stream and a consumer stream each
 * allocate batches whose size changes every round, and each frees what it allocated one round later,
 * on its own stream. Each stream's free memory sits between its own live batches, in pieces the other
 * stream's next, differently sized batch cannot use without waiting on it; a cache that keeps free
 * memory per stream (or per segment) holds two working sets where one would do.
 */
export function twoStreamPattern({ rounds = 60, seed = 2039 } = {}) {
  const t = new TraceBuilder();
  const next = seededRandom(seed);
  const streams = [1, 2];
  const previous = new Map(streams.map((s) => [s, []]));
  const longLived = [];
  for (let round = 0; round < rounds; round++) {
    for (const s of streams) {
      const batch = [];
      const pieces = 3 + Math.floor(next() * 4); // 3..6 buffers per batch
      for (let i = 0; i < pieces; i++) batch.push(t.alloc((8 + Math.floor(next() * 56)) * MiB, s));
      // Every few rounds a block outlives its batch (a result kept for a later stage), pinning the
      // memory around it.
      if (round % 4 === 0) longLived.push({ block: t.alloc(6 * MiB, s), until: round + 10 });
      for (const b of previous.get(s)) t.free(b);
      previous.set(s, batch);
    }
    for (let i = longLived.length - 1; i >= 0; i--) {
      if (longLived[i].until === round) {
        t.free(longLived[i].block);
        longLived.splice(i, 1);
      }
    }
  }
  for (const s of streams) for (const b of previous.get(s)) t.free(b);
  for (const l of longLived) t.free(l.block);
  return {
    header: { source: 'bench/fragmentation two-stream', workload: { pattern: 'two-stream', rounds, seed, streams } },
    events: t.events,
  };
}

/**
 * (c) Variable-batch training: a transformer-like model whose batch B and sequence length T change
 * every step. Per layer the forward keeps its activations for the backward (LayerNorm input B*T*H,
 * QKV 3*B*T*H, attention probabilities B*heads*T*T, attention output B*T*H, MLP input B*T*H and
 * hidden 4*B*T*H, bf16) and frees the attention scores once softmax has run; the loss needs logits
 * B*T*V (fp32); the backward frees each layer's activations as it goes, with gradient temporaries.
 * Weights, gradients and Adam's two moments are allocated once and live throughout.
 */
export function variableBatchPattern({ steps = 40, layers = 8, hidden = 1024, heads = 8, vocab = 32000, seed = 7 } = {}) {
  const t = new TraceBuilder();
  const next = seededRandom(seed);
  const bf16 = 2;
  const fp32 = 4;
  const layerParams = 12 * hidden * hidden; // QKV + output projection + a 4x MLP
  const persistent = [];
  persistent.push(t.alloc(vocab * hidden * bf16)); // embedding
  for (let l = 0; l < layers; l++) persistent.push(t.alloc(layerParams * bf16));
  const batches = [4, 8, 12, 16];
  const lengths = [128, 192, 256, 384, 512];
  let optimizerState = null;
  for (let step = 0; step < steps; step++) {
    const B = batches[Math.floor(next() * batches.length)];
    const T = lengths[Math.floor(next() * lengths.length)];
    const bth = B * T * hidden * bf16;
    const probs = B * heads * T * T * bf16;
    const saved = [];
    let x = t.alloc(bth, 0, 1); // embedding output
    for (let l = 0; l < layers; l++) {
      const layer = [x];
      layer.push(t.alloc(3 * bth, 0, 1)); // qkv
      const scores = t.alloc(probs, 0, 1);
      layer.push(t.alloc(probs, 0, 1)); // softmax(scores)
      t.free(scores, 0, 1);
      layer.push(t.alloc(bth, 0, 1)); // attention output
      layer.push(t.alloc(bth, 0, 1)); // MLP input (after the residual and LayerNorm)
      layer.push(t.alloc(4 * bth, 0, 1)); // MLP hidden
      x = t.alloc(bth, 0, 1); // the layer's output, the next layer's input
      saved.push(layer);
    }
    const logits = t.alloc(B * T * vocab * fp32, 0, 2);
    const gradLogits = t.alloc(B * T * vocab * fp32, 0, 2);
    t.free(logits, 0, 2);
    let grad = t.alloc(bth, 0, 3);
    t.free(gradLogits, 0, 3);
    t.free(x, 0, 3);
    const weightGrads = [];
    for (let l = layers - 1; l >= 0; l--) {
      const mlpGrad = t.alloc(4 * bth, 0, 3);
      const qkvGrad = t.alloc(3 * bth, 0, 3);
      const gradIn = t.alloc(bth, 0, 3);
      t.free(mlpGrad, 0, 3);
      t.free(qkvGrad, 0, 3);
      t.free(grad, 0, 3);
      for (const b of saved[l]) t.free(b, 0, 3);
      weightGrads.push(t.alloc(layerParams * bf16, 0, 3));
      grad = gradIn;
    }
    t.free(grad, 0, 3);
    if (optimizerState === null) {
      optimizerState = [];
      for (let l = 0; l < layers; l++) optimizerState.push(t.alloc(layerParams * fp32, 0, 4), t.alloc(layerParams * fp32, 0, 4));
    }
    for (const g of weightGrads) t.free(g, 0, 4); // zero_grad(set_to_none=True)
  }
  for (const b of optimizerState ?? []) t.free(b);
  for (const b of persistent) t.free(b);
  return {
    header: {
      source: 'bench/fragmentation variable-batch',
      workload: { pattern: 'variable-batch', steps, layers, hidden, heads, vocab, seed, batches, lengths },
      tags: ['setup', 'forward', 'loss', 'backward', 'optimizer'],
    },
    events: t.events,
  };
}

/** Every pattern, by the name its trace file has. */
export const patterns = {
  cycle: cyclePattern,
  'two-stream': twoStreamPattern,
  'variable-batch': variableBatchPattern,
};
