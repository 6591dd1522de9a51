/**
 * The transformer's data, generated on the host from the seed, with nothing downloaded: each step's
 * sequence length and batch (the schedule, like a fine-tune's dataset of sequences of varied length,
 * shuffled every epoch) and its tokens, drawn from an order-2 Markov chain over the vocabulary.
 *
 * Every random number comes from {@link Rng}, a 32-bit generator written out here in full so that
 * bench/baselines/transformer_data.py regenerates exactly the same schedule and tokens in Python
 * (integer arithmetic only, no floats: the two sides cannot drift apart). Change a constant here and
 * change it there; the tests compare both.
 * @module
 */

/** Streams of random numbers drawn from one seed: each use has its own, so that none shifts another. */
const streams = {
  /** The Markov chain's transition table. */
  chain: 1,
  /** The schedule's base shapes (one per step of an epoch). */
  shapes: 2,
  /** The held-out batch's tokens. */
  heldOut: 3,
  /** Epoch e's order of the shapes: stream epochOrder + e. */
  epochOrder: 1 << 20,
  /** Step k's tokens (k counted over the whole run): stream stepTokens + k. */
  stepTokens: 1 << 30,
} as const;

/** The golden ratio's 32-bit fraction: the generator's increment. */
const golden = 0x9e3779b9;

/** MurmurHash3's 32-bit finaliser: a bijection of 32-bit integers that mixes every bit into every other. */
function fmix32(x: number): number {
  let z = x >>> 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
  return (z ^ (z >>> 16)) >>> 0;
}

/**
 * A small, explicit 32-bit generator (a Weyl sequence with MurmurHash3's finaliser, as splitmix
 * does): state += 0x9E3779B9, output fmix32(state). Its state starts from the seed and a stream
 * number, so that every use of the seed draws from a sequence of its own.
 */
export class Rng {
  #state: number;

  constructor(seed: number, stream: number) {
    if (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff)
      throw new RangeError(`Expected an integer from 0 to 4294967295 for seed but received ${String(seed)}`);
    if (!Number.isSafeInteger(stream) || stream < 0 || stream > 0xffffffff)
      throw new RangeError(`Expected an integer from 0 to 4294967295 for stream but received ${String(stream)}`);
    this.#state = fmix32((fmix32((seed ^ 0x2545f491) >>> 0) + Math.imul(stream, golden)) >>> 0);
  }

  /** The next 32-bit unsigned integer. */
  next(): number {
    this.#state = (this.#state + golden) >>> 0;
    return fmix32(this.#state);
  }

  /** An integer in [0, n) for n from 1 to 2^21: floor(next() * n / 2^32), exact in doubles and in Python's integers alike. */
  below(n: number): number {
    return Math.floor((this.next() * n) / 2 ** 32);
  }
}

/** The schedule's bounds: a step's sequence length T in [minLen, maxLen] and batch B in [minBatch, maxBatch]. */
export interface ScheduleBounds {
  minLen: number;
  maxLen: number;
  minBatch: number;
  maxBatch: number;
  stepsPerEpoch: number;
}

/** One step's shape: B sequences of T tokens. */
export interface StepShape {
  length: number;
  batch: number;
}

/**
 * The schedule's base shapes, one per step of an epoch: the dataset's batches, each drawn once from
 * the seed (T uniform in [minLen, maxLen], then B uniform in [minBatch, maxBatch]). Every epoch runs
 * the same shapes in its own order ({@link epochOrder}), as a fine-tune's epochs see the same
 * sequences shuffled, so every epoch trains on the same number of tokens.
 */
export function baseShapes(b: ScheduleBounds, seed: number): StepShape[] {
  const rng = new Rng(seed, streams.shapes);
  return Array.from({ length: b.stepsPerEpoch }, () => {
    const length = b.minLen + rng.below(b.maxLen - b.minLen + 1);
    const batch = b.minBatch + rng.below(b.maxBatch - b.minBatch + 1);
    return { length, batch };
  });
}

/** Epoch `epoch`'s order of the base shapes: a Fisher-Yates shuffle from the epoch's stream. */
export function epochOrder(steps: number, seed: number, epoch: number): number[] {
  const rng = new Rng(seed, streams.epochOrder + epoch);
  const order = Array.from({ length: steps }, (_, i) => i);
  for (let i = steps - 1; i > 0; i--) {
    const j = rng.below(i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

/** The shapes of epoch `epoch`'s steps, in the order they run. */
export function epochShapes(b: ScheduleBounds, seed: number, epoch: number): StepShape[] {
  const shapes = baseShapes(b, seed);
  return epochOrder(shapes.length, seed, epoch).map((i) => shapes[i]!);
}

/** Successors of each token in the chain: after the pair (a, b) comes one of the `successors` tokens that follow b. */
const successors = 8;
/** Weight patterns over those successors; the token before b picks one. */
const patterns = 16;

/**
 * An order-2 Markov chain over `vocab` tokens with a sparse transition table: after the pair (a, b)
 * the next token is one of b's 8 successors (drawn once from the seed), with integer weights
 * 1, 2, 4, ... or 32 from one of 16 weight patterns, the one that a selects. So the next token
 * depends on the two before it, most of the vocabulary never follows a given pair, and a model that
 * learns only which tokens follow b already brings the loss from ln V to at most ln 8.
 */
export class MarkovChain {
  /** successor[b * 8 + k]: b's k-th successor. */
  readonly #successor: Int32Array;
  /** pattern[a]: the weight pattern that a selects. */
  readonly #pattern: Int32Array;
  /** cumulative[p * 8 + k]: the sum of pattern p's first k + 1 weights. */
  readonly #cumulative: Int32Array;

  constructor(
    readonly vocab: number,
    seed: number,
  ) {
    if (!Number.isSafeInteger(vocab) || vocab < 2 || vocab > 2 ** 21)
      throw new RangeError(`Expected an integer from 2 to 2097152 for vocab but received ${String(vocab)}`);
    const rng = new Rng(seed, streams.chain);
    this.#successor = Int32Array.from({ length: vocab * successors }, () => rng.below(vocab));
    this.#pattern = Int32Array.from({ length: vocab }, () => rng.below(patterns));
    this.#cumulative = new Int32Array(patterns * successors);
    for (let p = 0; p < patterns; p++) {
      let total = 0;
      for (let k = 0; k < successors; k++) {
        total += 1 << rng.below(6);
        this.#cumulative[p * successors + k] = total;
      }
    }
  }

  /** The token after the pair (a, b), from `rng`. */
  next(a: number, b: number, rng: Rng): number {
    const p = this.#pattern[a]! * successors;
    const r = rng.below(this.#cumulative[p + successors - 1]!);
    let k = 0;
    while (this.#cumulative[p + k]! <= r) k++;
    return this.#successor[b * successors + k]!;
  }

  /**
   * `batch` sequences of `length` + 1 tokens from `rng`, each started by two uniform tokens: the
   * inputs are each sequence's first `length` tokens, the targets the `length` after them, both
   * [batch * length] row by row.
   */
  sample(batch: number, length: number, rng: Rng): { inputs: Int32Array; targets: Int32Array } {
    const inputs = new Int32Array(batch * length);
    const targets = new Int32Array(batch * length);
    for (let s = 0; s < batch; s++) {
      let a = rng.below(this.vocab);
      let b = rng.below(this.vocab);
      const row = s * length;
      inputs[row] = a;
      for (let t = 0; t < length; t++) {
        targets[row + t] = b;
        if (t + 1 === length) break;
        inputs[row + t + 1] = b;
        const c = this.next(a, b, rng);
        a = b;
        b = c;
      }
    }
    return { inputs, targets };
  }
}

/** The tokens of step `step` of the run (counted over all epochs: epoch * stepsPerEpoch + s) of the given shape. */
export function stepTokens(chain: MarkovChain, seed: number, step: number, shape: StepShape): { inputs: Int32Array; targets: Int32Array } {
  return chain.sample(shape.batch, shape.length, new Rng(seed, streams.stepTokens + step));
}

/** The held-out batch, the same for every epoch: `shape.batch` sequences of `shape.length` tokens from a stream of its own. */
export function heldOutTokens(chain: MarkovChain, seed: number, shape: StepShape): { inputs: Int32Array; targets: Int32Array } {
  return chain.sample(shape.batch, shape.length, new Rng(seed, streams.heldOut));
}
