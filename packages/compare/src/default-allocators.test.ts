/**
 * The allocators a command runs when none are named, on the registry as the built-in strategy
 * packages fill it, with a GPU and without one (whatever this machine has: the rule takes it as given).
 */
import { describe, expect, it } from 'vitest';
import { listAllocators, strategyLabel, type StrategyInfo } from '@gpumem/allocator-core';
import { defaultAllocators, hostMemoryOnGpuReason, noCudaDeviceReason } from './default-allocators.js';
import { importStrategies } from './strategies.js';

await importStrategies();

const registered = listAllocators();
const names = (specs: readonly { label: string }[]) => specs.map((s) => s.label);
const strategyInfoOf = (name: string) => registered.find((s) => s.name === name)!;
const flagged = (flag: keyof StrategyInfo) => registered.filter((s) => s[flag] === true).map((s) => s.name);

/** A registered strategy's info with the given flags (every other flag off). */
const info = (name: string, flags: Partial<StrategyInfo> = {}): StrategyInfo => ({
  name,
  description: name,
  requiresCuda: false,
  nativeLayers: false,
  capturable: false,
  hostMemory: false,
  requiresOptions: false,
  managedMemory: false,
  spillsToHost: false,
  peerAccess: false,
  sleep: false,
  addressOnly: false,
  ...flags,
});

describe('defaultAllocators', () => {
  it('without a GPU: every strategy that runs on the host, host strategies included, whatever the runs do', () => {
    for (const runsKernels of [true, false]) {
      const { specs, skipped } = defaultAllocators({ gpu: false, runsKernels });
      expect(names(specs)).toEqual(registered.filter((s) => !s.requiresCuda && !s.requiresOptions).map(strategyLabel));
      expect(names(specs)).toEqual(expect.arrayContaining(flagged('hostMemory')));
      expect(skipped).toEqual(
        registered.filter((s) => s.requiresCuda && !s.requiresOptions).map((s) => ({ label: s.name, reason: noCudaDeviceReason })),
      );
      for (const s of specs) expect(s).toEqual({ label: strategyLabel(strategyInfoOf(s.name)), name: s.name, options: {} });
    }
    // a strategy that says which allocator it reproduces is labelled by it
    expect(names(defaultAllocators({ gpu: false, runsKernels: false }).specs)).toContain("caching (PyTorch's allocator)");
  });

  it('on a GPU, leaves the host-memory strategies out of runs that compute (training), and keeps them for a replay', () => {
    const host = flagged('hostMemory');
    expect(host.length).toBeGreaterThan(0);
    const training = defaultAllocators({ gpu: true, runsKernels: true });
    expect(names(training.specs)).toEqual(registered.filter((s) => !s.hostMemory && !s.requiresOptions).map(strategyLabel));
    expect(training.skipped).toEqual(host.map((label) => ({ label, reason: hostMemoryOnGpuReason })));
    const replay = defaultAllocators({ gpu: true, runsKernels: false });
    expect(names(replay.specs)).toEqual(registered.filter((s) => !s.requiresOptions).map(strategyLabel));
    expect(names(replay.specs)).toEqual(expect.arrayContaining([...host, ...flagged('requiresCuda')]));
    expect(replay.skipped).toEqual([]);
  });

  it('never lists a strategy that needs options, nor says it was skipped: it runs only when named', () => {
    const needsOptions = flagged('requiresOptions');
    expect(needsOptions.length).toBeGreaterThan(0);
    for (const gpu of [true, false])
      for (const runsKernels of [true, false]) {
        const { specs, skipped } = defaultAllocators({ gpu, runsKernels });
        for (const name of needsOptions) {
          expect(names(specs)).not.toContain(name);
          expect(names(skipped)).not.toContain(name);
        }
      }
  });

  it('decides by the flags alone, in the order given', () => {
    const strategies = [
      info('plain'),
      info('gpu-only', { requiresCuda: true }),
      info('on-host', { hostMemory: true }),
      info('gpu-and-host', { requiresCuda: true, hostMemory: true }),
      info('with-library', { requiresOptions: true }),
      info('spills', { spillsToHost: true }),
    ];
    const pick = (gpu: boolean, runsKernels: boolean) => {
      const d = defaultAllocators({ gpu, runsKernels, strategies });
      return [names(d.specs), d.skipped.map((s) => `${s.label}: ${s.reason === noCudaDeviceReason ? 'no GPU' : 'host'}`)];
    };
    expect(pick(false, true)).toEqual([
      ['plain', 'on-host', 'spills'],
      ['gpu-only: no GPU', 'gpu-and-host: no GPU'],
    ]);
    expect(pick(false, false)).toEqual([
      ['plain', 'on-host', 'spills'],
      ['gpu-only: no GPU', 'gpu-and-host: no GPU'],
    ]);
    expect(pick(true, true)).toEqual([
      ['plain', 'gpu-only', 'spills'],
      ['on-host: host', 'gpu-and-host: host'],
    ]);
    expect(pick(true, false)).toEqual([['plain', 'gpu-only', 'on-host', 'gpu-and-host', 'spills'], []]);
  });
});
