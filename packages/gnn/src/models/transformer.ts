/**
 * A small GPT-style decoder (f32): token and position embeddings, `layers` pre-LN blocks, a final
 * LayerNorm and an LM head tied to the token embedding (logits = x wteᵀ). Forward and backward are
 * explicit; every activation is a tensor of the runtime, allocated at the step's shape [B*T, ·] and
 * freed as soon as nothing later needs it, so the allocator sees what a framework's variable-length
 * training step asks of it.
 * @module
 */
import { LayerNorm } from '../framework/layer-norm.js';
import { ParameterSet } from '../framework/nn.js';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import { TransformerBlock } from './transformer-block.js';

/** The model's sizes. */
export interface TransformerConfig {
  /** Tokens of the vocabulary, V. */
  vocab: number;
  /** The longest sequence, Tmax: rows of the position embedding. */
  context: number;
  /** The width, C. */
  embed: number;
  /** Attention heads, H (dividing C). */
  heads: number;
  /** Blocks, L. */
  layers: number;
}

/** Parameters of a transformer of these sizes: V·C + Tmax·C + L·(12C² + 13C) + 2C. */
export function transformerParameters(c: TransformerConfig): number {
  return c.vocab * c.embed + c.context * c.embed + c.layers * (12 * c.embed * c.embed + 13 * c.embed) + 2 * c.embed;
}

/** What forward keeps for backward. */
interface SavedForward {
  B: number;
  T: number;
  tokens: Tensor; // i32 [B*T], the caller's
  inputs: Tensor[]; // each block's input [B*T, C]; the last is the final LayerNorm's input
  xf: Tensor; // [B*T, C] the final LayerNorm's output: the head's input
}

export class Transformer {
  readonly params: ParameterSet;
  readonly blocks: TransformerBlock[];
  readonly lnf: LayerNorm;
  #saved: SavedForward | undefined;

  constructor(
    private readonly rt: Runtime,
    readonly config: TransformerConfig,
    seed: number,
  ) {
    const { vocab, context, embed, heads, layers } = config;
    const blockNames = Array.from({ length: layers }, (_, l) => `h${l}`);
    this.params = new ParameterSet(rt, [
      { name: 'wte', shape: [vocab, embed] },
      { name: 'wpe', shape: [context, embed] },
      ...blockNames.flatMap((name) => TransformerBlock.parameterSpecs(name, embed)),
      ...LayerNorm.parameterSpecs('lnf', embed),
    ]);
    this.blocks = blockNames.map((name) => new TransformerBlock(rt, name, embed, heads, this.params));
    this.lnf = new LayerNorm(rt, 'lnf', embed, this.params);
    // GPT-2's init: every weight N(0, 0.02), biases 0, LayerNorms gamma 1 and beta 0
    const { values } = this.params;
    rt.ops.randomNormal(rt.onDevice, rt.s, values.ptr, values.size, seed, 0);
    rt.ops.scale(rt.onDevice, rt.s, 0.02, values.ptr, values.ptr, values.size);
    for (const p of this.params.list) if (p.name.endsWith('.bias')) rt.ops.fillF32(rt.onDevice, rt.s, p.value.ptr, p.value.size, 0);
    for (const block of this.blocks) {
      block.ln1.init();
      block.ln2.init();
    }
    this.lnf.init();
  }

  get #wte() {
    return this.params.get('wte');
  }

  /**
   * tokens: i32 [B*T] (B sequences of T tokens, T <= context; kept by the caller until backward) →
   * logits [B*T, V], a new tensor. `save` false (evaluation): nothing is kept and every activation is
   * freed as soon as the next one exists.
   */
  forward(tokens: Tensor, B: number, T: number, save = true): Tensor {
    const { rt } = this;
    const { vocab, context, embed } = this.config;
    if (T > context) throw new RangeError(`Expected a sequence length of at most the context, ${context}, but received ${T}`);
    if (tokens.size !== B * T) throw new RangeError(`Expected ${B * T} tokens (B ${B} x T ${T}) but received ${tokens.size}`);
    const rows = B * T;
    let x = rt.empty([rows, embed]);
    rt.ops.embedding(rt.onDevice, rt.s, tokens.ptr, this.#wte.value.ptr, this.params.get('wpe').value.ptr, x.ptr, B, T, embed);
    const inputs: Tensor[] = [];
    for (const block of this.blocks) {
      const next = block.forward(x, B, T, save);
      if (save) inputs.push(x);
      else x.dispose();
      x = next;
    }
    const xf = this.lnf.forward(x, save);
    if (save) inputs.push(x);
    else x.dispose();
    const logits = rt.empty([rows, vocab]);
    rt.ops.gemm(rt.onDevice, rt.s, false, true, rows, vocab, embed, 1, xf.ptr, this.#wte.value.ptr, 0, logits.ptr);
    if (save) this.#saved = { B, T, tokens, inputs, xf };
    else xf.dispose();
    return logits;
  }

  /**
   * dLogits: [B*T, V] → every parameter's gradient, written. Frees dLogits once the head's gradients
   * have used it, and what forward kept, each activation as soon as backward has passed it.
   */
  backward(dLogits: Tensor): void {
    const saved = this.#saved;
    if (!saved) throw new Error('transformer: backward before forward');
    this.#saved = undefined;
    const { rt } = this;
    const { vocab, embed } = this.config;
    const { B, T, tokens, inputs, xf } = saved;
    const rows = B * T;
    const wte = this.#wte;
    // the tied head: dxf = dLogits wte, dWte = dLogitsᵀ xf (written; the embedding's part is added below)
    const dx = rt.empty([rows, embed]);
    rt.ops.gemm(rt.onDevice, rt.s, false, false, rows, embed, vocab, 1, dLogits.ptr, wte.value.ptr, 0, dx.ptr);
    rt.ops.gemm(rt.onDevice, rt.s, true, false, vocab, embed, rows, 1, dLogits.ptr, xf.ptr, 0, wte.grad.ptr);
    dLogits.dispose();
    xf.dispose();
    this.lnf.backward(dx); // in place
    inputs.pop()!.dispose();
    for (let l = this.blocks.length - 1; l >= 0; l--) {
      this.blocks[l]!.backward(dx); // in place
      inputs.pop()!.dispose();
    }
    const wpe = this.params.get('wpe');
    rt.ops.fillF32(rt.onDevice, rt.s, wpe.grad.ptr, wpe.grad.size, 0);
    rt.ops.embeddingBackward(rt.onDevice, rt.s, dx.ptr, tokens.ptr, wte.grad.ptr, wpe.grad.ptr, B, T, embed);
    dx.dispose();
  }

  dispose(): void {
    this.params.dispose();
  }
}
