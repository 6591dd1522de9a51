/**
 * For tests of compare's terminal table: its columns as a run without a host tier prints them.
 * @module
 */

/** The plain table's header, `throughput` naming the workload's rate column ('nodes/s', 'images/s'). */
export function plainCompareHeader(throughput = 'nodes/s'): string[] {
  return [
    'allocator',
    'status',
    'median epoch (min\u2013max)',
    throughput,
    'peak allocated',
    'peak reserved',
    'reserved/alloc',
    'upstream calls',
    'OOMs',
    'final loss',
    'accuracy',
  ];
}
