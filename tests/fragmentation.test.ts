/**
 * The committed fragmentation traces (bench/fragmentation) replayed on the host: expandable segments
 * keep reserved memory at the peak in use where a segment pool strands it (the cycle pattern), and
 * two streams taking turns fit a capacity at which the pool runs out of memory.
 */
import { describe, expect, it } from 'vitest';
import { compileTrace, createReplayAllocator, readTrace, replayTrace, type CompiledTrace } from '@gpumem/trace';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-expandable';

const MiB = 2 ** 20;
const traces = new URL('../bench/fragmentation/traces/', import.meta.url).pathname;

async function load(name: string): Promise<CompiledTrace> {
  return compileTrace(await readTrace(`${traces}${name}.jsonl.gz`));
}

function replay(trace: CompiledTrace, name: string, capacityBytes?: number) {
  const { allocator } = createReplayAllocator(
    { name, options: { upstream: 'host' } },
    capacityBytes === undefined ? {} : { capacityBytes },
  );
  try {
    return replayTrace(trace, allocator, { repeats: 1 });
  } finally {
    allocator.dispose();
  }
}

describe('fragmentation traces on the host', () => {
  it('(a) the cycle: expandable reserves what is allocated, the pool six times as much', async () => {
    const trace = await load('cycle');
    expect(trace.peakAllocatedBytes).toBe((48 * 100 + 128 + 4 * 99) * MiB);
    const expandable = replay(trace, 'expandable');
    const pool = replay(trace, 'pool');
    expect(expandable.ooms).toBe(0);
    expect(expandable.peakAllocatedBytes).toBe(trace.peakAllocatedBytes);
    expect(expandable.peakReservedBytes).toBeLessThanOrEqual(1.02 * expandable.peakAllocatedBytes);
    expect(pool.peakReservedBytes).toBeGreaterThan(5 * pool.peakAllocatedBytes);
  });

  it('(b) two streams: expandable fits a capacity at which the pool runs out of memory', async () => {
    const trace = await load('two-stream');
    expect(trace.streamIds).toEqual([1, 2]);
    // Peak allocated is 673 MiB; the pool needs about 842 MiB. Expandable about 771 MiB: it unmaps
    // only runs that are idle as a whole, and a long-lived block keeps its run's idle granules mapped.
    const capacity = 800 * MiB;
    expect(replay(trace, 'pool', capacity).ooms).toBeGreaterThan(0);
    const expandable = replay(trace, 'expandable', capacity);
    expect(expandable.ooms).toBe(0);
    expect(expandable.peakReservedBytes).toBeLessThanOrEqual(capacity);
  });
});
