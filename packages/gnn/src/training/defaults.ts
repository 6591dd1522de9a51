/**
 * The defaults every workload shares (each workload's own are in its folder, e.g.
 * workloads/mlp/defaults.ts): train(), the command line's help and the comparison's titles read
 * them from there.
 * @module
 */

/** Defaults every model shares. */
export const commonDefaults = { epochs: 1, seed: 0 } as const;
