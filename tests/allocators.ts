/**
 * The allocators under test: every registered strategy (plug-ins included, so a new one is
 * covered as soon as it registers), with the options that make it run here, plus variants. The
 * strategy packages are the workspaces whose package.json says `"gpumem": { "strategy": true }`;
 * each registers itself on import.
 */
import { listAllocators, type Allocator, createAllocator, TrackingAllocator } from '@gpumem/allocator-core';
import '@gpumem/examples/arena';
import { strategyPackages } from '../scripts/sync-workspaces.mjs';
import { gpuAvailable } from './gpu.js';
import { exampleSlabLibrary } from './plugin-library.js';

for (const { name } of strategyPackages()) await import(name);

export interface AllocatorCase {
  /** Shown in test names. */
  label: string;
  name: string;
  options: Record<string, unknown>;
  requiresCuda: boolean;
  /** A request this allocator cannot meet, to check OutOfMemoryError. */
  oversizeBytes: number;
  /** Wrap it in the TypeScript tracking adaptor (a ring of this many events). */
  tsTracking?: number;
  /** The options that leave it a device of 16 MiB (the conformance suite's smallDevice; default limitBytes). */
  smallDevice?: Record<string, unknown>;
}

const hostOversize = 2 ** 52; // 4 PiB: more than any machine's memory, still a safe integer

/**
 * Options per strategy. Managed memory is capped with limitBytes so that the out-of-memory
 * check never asks the driver for more managed memory than the card has free.
 */
const variants: Record<string, Array<Omit<AllocatorCase, 'name' | 'requiresCuda'>>> = {
  host: [
    { label: 'host', options: {}, oversizeBytes: hostOversize },
    { label: 'host+native tracking', options: { trackingCapacity: 64 }, oversizeBytes: hostOversize },
  ],
  cuda: [{ label: 'cuda', options: {}, oversizeBytes: 2 ** 50 }],
  uvm: [{ label: 'uvm', options: { limitBytes: 256 * 2 ** 20 }, oversizeBytes: 512 * 2 ** 20 }],
  async: [{ label: 'async', options: {}, oversizeBytes: 2 ** 50 }],
  pool: [
    { label: 'pool(host)', options: { upstream: 'host' }, oversizeBytes: hostOversize },
    { label: 'pool(cuda)', options: { upstream: 'cuda' }, oversizeBytes: 2 ** 50 },
  ],
  caching: [
    { label: 'caching(host)', options: { upstream: 'host' }, oversizeBytes: hostOversize },
    // 1 GiB ranges on the host: many short-lived streams each reserve one per pool.
    {
      label: 'caching(host, expandable)',
      options: { upstream: 'host', expandableSegments: true, expandableAddressSpaceBytes: 2 ** 30 },
      oversizeBytes: hostOversize,
    },
    { label: 'caching(cuda)', options: { upstream: 'cuda' }, oversizeBytes: 2 ** 50 },
    { label: 'caching(cuda, expandable)', options: { upstream: 'cuda', expandableSegments: true }, oversizeBytes: 2 ** 50 },
  ],
  // The example C++ plug-in (examples/cpp), loaded through gpumem/plugin.h.
  plugin: [
    { label: 'plugin(slab, host)', options: { library: exampleSlabLibrary, device: 'host' }, oversizeBytes: hostOversize },
    { label: 'plugin(slab, cuda)', options: { library: exampleSlabLibrary, device: 0 }, oversizeBytes: 2 ** 50 },
  ],
  expandable: [
    // 1 GiB ranges on the host twin: many short-lived streams each reserve one.
    { label: 'expandable(host)', options: { upstream: 'host', reserveBytes: 2 ** 30 }, oversizeBytes: hostOversize },
    { label: 'expandable(host)+native tracking', options: { upstream: 'host', trackingCapacity: 64 }, oversizeBytes: hostOversize },
    { label: 'expandable(cuda)', options: { upstream: 'cuda' }, oversizeBytes: 2 ** 50 },
  ],
  pinned: [
    { label: 'pinned(host)', options: { upstream: 'host' }, oversizeBytes: hostOversize },
    // device: 0 marks it as needing a GPU; 2^50 is past the cap on pinned bytes, refused before pinning.
    { label: 'pinned(pinned)', options: { upstream: 'pinned', device: 0 }, oversizeBytes: 2 ** 50 },
  ],
  tiered: [
    // A wake makes room on the device tier by moving blocks to the host tier: both are capped.
    {
      label: 'tiered(host)',
      options: { upstream: 'host' },
      oversizeBytes: hostOversize,
      smallDevice: { deviceBudgetBytes: 16 * 2 ** 20, hostBudgetBytes: 16 * 2 ** 20 },
    },
    // A 4 MiB device budget: the larger requests spill to the host tier.
    {
      label: 'tiered(host, spilling)+native tracking',
      options: { upstream: 'host', deviceBudgetBytes: 4 * 2 ** 20, trackingCapacity: 64 },
      oversizeBytes: hostOversize,
    },
    {
      label: 'tiered(cuda)',
      options: { upstream: 'cuda' },
      oversizeBytes: 2 ** 50,
      smallDevice: { deviceBudgetBytes: 16 * 2 ** 20, hostBudgetBytes: 16 * 2 ** 20 },
    },
  ],
  arena: [
    { label: 'arena(host)', options: { upstream: 'host' }, oversizeBytes: hostOversize },
    { label: 'arena(cuda)', options: { upstream: 'cuda' }, oversizeBytes: 2 ** 50 },
    { label: 'arena(host)+TS tracking', options: { upstream: 'host' }, oversizeBytes: hostOversize, tsTracking: 64 },
  ],
};

function needsCuda(options: Record<string, unknown>, registered: boolean): boolean {
  return registered || options.upstream === 'cuda' || typeof options.device === 'number';
}

/** Every case; `runnable` says whether it can run on this machine. */
export function allocatorCases(): Array<AllocatorCase & { runnable: boolean }> {
  const cases: Array<AllocatorCase & { runnable: boolean }> = [];
  for (const info of listAllocators()) {
    const list = variants[info.name] ?? [{ label: info.name, options: {}, oversizeBytes: hostOversize }];
    for (const v of list) {
      const requiresCuda = needsCuda(v.options, info.requiresCuda);
      cases.push({ ...v, name: info.name, requiresCuda, runnable: gpuAvailable || !requiresCuda });
    }
  }
  return cases;
}

export function make(c: AllocatorCase): Allocator {
  const allocator = createAllocator(c.name, c.options);
  return c.tsTracking === undefined ? allocator : new TrackingAllocator(allocator, c.tsTracking, { ownsUpstream: true });
}
