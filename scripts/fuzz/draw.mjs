// The trace fuzzer's draws from its seeded generator (a function returning numbers in [0, 1)).

/** One of `items`. */
export const pick = (rnd, items) => items[Math.floor(rnd() * items.length)];

/** An integer in [0, below). */
export const int = (rnd, below) => Math.floor(rnd() * below);
