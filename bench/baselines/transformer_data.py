"""The transformer workload's data in Python, without torch: the schedule of step shapes and the tokens of
an order-2 Markov chain, exactly as packages/gnn/src/workloads/transformer/schedule.ts generates them
(the same 32-bit generator, streams and integer arithmetic), so that transformer_torch.py trains on the
same batches as `gpumem train --model transformer`. Change a constant there and change it here;
packages/gnn/src/workloads/transformer/schedule.test.ts compares both.

    python3 bench/baselines/transformer_data.py --seed 0 --steps 2   # JSON of the first shapes and tokens
"""
import argparse
import json

MASK = 0xFFFFFFFF
GOLDEN = 0x9E3779B9

# streams of one seed (schedule.ts: streams)
STREAM_CHAIN = 1
STREAM_SHAPES = 2
STREAM_HELD_OUT = 3
STREAM_EPOCH_ORDER = 1 << 20
STREAM_STEP_TOKENS = 1 << 30

SUCCESSORS = 8
PATTERNS = 16

# the transformer's defaults (defaults.ts: transformerDefaults)
DEFAULTS = {'vocab': 256, 'embed': 256, 'heads': 4, 'layers': 4, 'context': 1024, 'min_len': 64, 'max_len': 1024,
            'min_batch': 4, 'max_batch': 12, 'steps_per_epoch': 20, 'lr': 1e-3}


def fmix32(x):
    z = x & MASK
    z = ((z ^ (z >> 16)) * 0x85EBCA6B) & MASK
    z = ((z ^ (z >> 13)) * 0xC2B2AE35) & MASK
    return z ^ (z >> 16)


class Rng:
    """schedule.ts's Rng: state += 0x9E3779B9, output fmix32(state), its state started from (seed, stream)."""

    def __init__(self, seed, stream):
        if not (0 <= seed <= MASK and 0 <= stream <= MASK):
            raise ValueError(f'seed and stream must be 32-bit unsigned integers (received {seed}, {stream})')
        self.state = fmix32((fmix32(seed ^ 0x2545F491) + stream * GOLDEN) & MASK)

    def next(self):
        self.state = (self.state + GOLDEN) & MASK
        return fmix32(self.state)

    def below(self, n):
        return (self.next() * n) >> 32


def base_shapes(min_len, max_len, min_batch, max_batch, steps_per_epoch, seed):
    """The epoch's shapes as (length, batch), one per step, before the epoch's shuffle."""
    rng = Rng(seed, STREAM_SHAPES)
    shapes = []
    for _ in range(steps_per_epoch):
        length = min_len + rng.below(max_len - min_len + 1)
        batch = min_batch + rng.below(max_batch - min_batch + 1)
        shapes.append((length, batch))
    return shapes


def epoch_order(steps, seed, epoch):
    rng = Rng(seed, STREAM_EPOCH_ORDER + epoch)
    order = list(range(steps))
    for i in range(steps - 1, 0, -1):
        j = rng.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


class MarkovChain:
    """After the pair (a, b): one of b's 8 successors, weighted by the pattern that a selects."""

    def __init__(self, vocab, seed):
        rng = Rng(seed, STREAM_CHAIN)
        self.vocab = vocab
        self.successor = [rng.below(vocab) for _ in range(vocab * SUCCESSORS)]
        self.pattern = [rng.below(PATTERNS) for _ in range(vocab)]
        self.cumulative = []
        for _ in range(PATTERNS):
            total = 0
            for _ in range(SUCCESSORS):
                total += 1 << rng.below(6)
                self.cumulative.append(total)

    def next(self, a, b, rng):
        p = self.pattern[a] * SUCCESSORS
        r = rng.below(self.cumulative[p + SUCCESSORS - 1])
        k = 0
        while self.cumulative[p + k] <= r:
            k += 1
        return self.successor[b * SUCCESSORS + k]

    def sample(self, batch, length, rng):
        """(inputs, targets): lists of batch * length token ids, row by row."""
        inputs, targets = [], []
        for _ in range(batch):
            a = rng.below(self.vocab)
            b = rng.below(self.vocab)
            inputs.append(a)
            for t in range(length):
                targets.append(b)
                if t + 1 == length:
                    break
                inputs.append(b)
                a, b = b, self.next(a, b, rng)
        return inputs, targets


def step_tokens(chain, seed, step, length, batch):
    """The tokens of the run's step `step` (epoch * steps_per_epoch + s)."""
    return chain.sample(batch, length, Rng(seed, STREAM_STEP_TOKENS + step))


def held_out_tokens(chain, seed, length, batch):
    return chain.sample(batch, length, Rng(seed, STREAM_HELD_OUT))


def run_steps(vocab, min_len, max_len, min_batch, max_batch, steps_per_epoch, seed, epochs):
    """Every step of `epochs` epochs in order: (epoch, step, length, batch, inputs, targets)."""
    chain = MarkovChain(vocab, seed)
    shapes = base_shapes(min_len, max_len, min_batch, max_batch, steps_per_epoch, seed)
    for epoch in range(epochs):
        for s, i in enumerate(epoch_order(steps_per_epoch, seed, epoch)):
            length, batch = shapes[i]
            inputs, targets = step_tokens(chain, seed, epoch * steps_per_epoch + s, length, batch)
            yield epoch, s, length, batch, inputs, targets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--vocab', type=int, default=DEFAULTS['vocab'])
    ap.add_argument('--min-len', type=int, default=DEFAULTS['min_len'])
    ap.add_argument('--max-len', type=int, default=DEFAULTS['max_len'])
    ap.add_argument('--min-batch', type=int, default=DEFAULTS['min_batch'])
    ap.add_argument('--max-batch', type=int, default=DEFAULTS['max_batch'])
    ap.add_argument('--steps-per-epoch', type=int, default=DEFAULTS['steps_per_epoch'])
    ap.add_argument('--epochs', type=int, default=1)
    args = ap.parse_args()
    chain = MarkovChain(args.vocab, args.seed)
    steps = [{'epoch': e, 'step': s, 'length': t, 'batch': b, 'inputs': x, 'targets': y}
             for e, s, t, b, x, y in run_steps(args.vocab, args.min_len, args.max_len, args.min_batch, args.max_batch,
                                               args.steps_per_epoch, args.seed, args.epochs)]
    held_inputs, held_targets = held_out_tokens(chain, args.seed, args.max_len, args.min_batch)
    rng = Rng(args.seed, 0)
    print(json.dumps({'first': [rng.next() for _ in range(4)],
                      'shapes': base_shapes(args.min_len, args.max_len, args.min_batch, args.max_batch,
                                            args.steps_per_epoch, args.seed),
                      'steps': steps, 'held_out': {'inputs': held_inputs, 'targets': held_targets}}))


if __name__ == '__main__':
    main()
