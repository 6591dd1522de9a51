/**
 * Replay on the host is deterministic: the same two-stream PyTorch snapshot, replayed again and
 * again in one process with the host's memory laid out differently each time, gives the same peak
 * reserved, the same fragmentation at the peak and the same minimum capacity, and within a row the
 * fragmentation at the peak is measured at the peak the table shows.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createAllocator, deviceStatus, hasCudaDevice, type Allocator, type DevicePtr } from '@gpumem/allocator-core';
import { strategyPackages } from '../../../scripts/sync-workspaces.mjs';
import { readTrace } from './format.js';
import { findMinCapacity } from './min-capacity.js';
import { profileReplay } from './profile.js';
import { compileTrace, replayTrace, type ReplayResult } from './replay.js';

// every strategy package registers itself on import (the workspaces say which are strategies)
for (const { name } of strategyPackages()) await import(name);

const fixture = fileURLToPath(new URL('./snapshot/fixtures/two-streams.pickle.gz', import.meta.url));
const MiB = 1024 * 1024;
const gpu = hasCudaDevice();
const noGpuReason = gpu ? '' : deviceStatus();
if (!gpu && process.env.GPUMEM_REQUIRE_GPU === '1') throw new Error(`GPUMEM_REQUIRE_GPU=1 but ${noGpuReason}`);
const gpuTitle = (title: string) => (gpu ? title : `${title} [skipped: ${noGpuReason}]`);

/**
 * Holds `count` host blocks of a few MiB each while `f` runs: the host's allocator then hands the
 * strategies' segments other addresses, in another order, as other threads of a real process do.
 */
function withHeldHostMemory<T>(count: number, f: () => T): T {
  const host: Allocator = createAllocator('host', {});
  const held: Array<[DevicePtr, number]> = [];
  try {
    for (let k = 0; k < count; k++) {
      const bytes = (1 + ((k * 7) % 5)) * 3 * MiB + k * 4096;
      held.push([host.malloc(bytes), bytes]);
    }
    // free every other one: holes of several sizes between the blocks kept
    for (let k = 0; k < held.length; k += 2) host.free(held[k]![0], held[k]![1]);
    return f();
  } finally {
    for (let k = 1; k < held.length; k += 2) host.free(held[k]![0], held[k]![1]);
    host.dispose();
  }
}

describe('replay on the host', async () => {
  const compiled = compileTrace(await readTrace(fixture));

  it('has a two-stream fixture', () => {
    expect(compiled.streamIds.length).toBe(2);
    expect(compiled.allocs).toBeGreaterThan(150);
  });

  for (const name of ['pool', 'pinned', 'expandable', 'tiered', 'host']) {
    it(`gives the same numbers run after run: ${name}`, () => {
      const runs = [0, 3, 8, 1, 13, 5].map((held) =>
        withHeldHostMemory(held, () => {
          const allocator = createAllocator(name, {});
          let result: ReplayResult;
          try {
            result = replayTrace(compiled, allocator, { repeats: 2 });
          } finally {
            allocator.dispose();
          }
          const profile = profileReplay(compiled, { name });
          const min = findMinCapacity(compiled, { name }, { capBytes: 4096 * MiB, resolutionBytes: MiB });
          return {
            peakReserved: result.peakReservedBytes,
            peakReservedRange: result.peakReservedRange,
            profilePeakReserved: profile.peakReservedBytes,
            reservedAtPeak: profile.reservedAtPeakBytes,
            fragmentationAtPeak: profile.fragmentationAtPeakBytes,
            minCapacity: min.bytes,
          };
        }),
      );
      for (const run of runs) expect(run).toEqual(runs[0]);
      // one instant: the fragmentation at the peak is measured where the peak reserved is
      expect(runs[0]!.reservedAtPeak).toBe(runs[0]!.peakReserved);
      expect(runs[0]!.profilePeakReserved).toBe(runs[0]!.peakReserved);
      expect(runs[0]!.peakReservedRange).toEqual([runs[0]!.peakReserved, runs[0]!.peakReserved]);
    });
  }
});

describe('replay on a GPU', async () => {
  const compiled = compileTrace(await readTrace(fixture));

  // Real timing decides when a stream's freed memory can be reused on another: the answers come with their spread.
  for (const name of ['pool', 'async']) {
    it.skipIf(!gpu)(gpuTitle(`gives the spread of peak reserved and minimum capacity over repeats: ${name}`), () => {
      const allocator = createAllocator(name, {});
      try {
        const r = replayTrace(compiled, allocator, { repeats: 3 });
        expect(r.peakReservedRange[0]).toBeLessThanOrEqual(r.peakReservedRange[1]);
        expect(r.peakReservedRange[1]).toBe(r.peakReservedBytes);
      } finally {
        allocator.dispose();
      }
      const min = findMinCapacity(compiled, { name }, { capBytes: 4096 * MiB, resolutionBytes: 4 * MiB, repeats: 3 });
      expect(min.searches).toBe(3);
      expect(min.bytesRange![0]).toBeLessThanOrEqual(min.bytesRange![1]);
      expect(min.bytes).toBe(min.bytesRange![1]);
    });
  }
});
