/**
 * @gpumem/cli: the `gpumem` command line (info, train, record, replay, compare) and plug-in loading.
 * The bin is `dist/cli.js`; this module exports what other tools reuse.
 * @packageDocumentation
 */
export { allocatorPlugins, loadAllocatorPlugins } from './plugins.js';
export { UsageError } from './commands/args.js';
