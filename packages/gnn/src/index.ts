/**
 * @gpumem/gnn: the shared trainer (device tensors, ops, MLP and GCN) that runs on any allocator,
 * and the `gpumem` command line. This release holds the command line's `info` command; the
 * trainer itself is being built.
 * @packageDocumentation
 */
export { allocatorPlugins, loadAllocatorPlugins } from './plugins.js';
