/**
 * The native core's strategy descriptors (native/include/gpumem/strategy_registry.hpp), as the
 * addon's strategies() lists them: every built-in strategy of the TypeScript registry is there with
 * the same capability flags, and each option says its kind and default.
 */
import { describe, expect, it } from 'vitest';
import { loadNative, strategyInfo } from '@gpumem/allocator-core';
import '@gpumem/allocator-async';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-pinned';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-tiered';
import '@gpumem/allocator-uvm';

interface NativeStrategyOption {
  key: string;
  kind: string;
  minimum?: number;
  choices?: string[];
  default?: unknown;
  required: boolean;
  help: string;
}

interface NativeStrategy {
  name: string;
  description: string;
  layer: string;
  wraps?: string;
  flags: Record<string, boolean>;
  options: NativeStrategyOption[];
}

const strategies = (loadNative() as unknown as { strategies(): NativeStrategy[] }).strategies();
const byName = new Map(strategies.map((s) => [s.name, s]));

describe('native strategy descriptors', () => {
  it('lists the core strategies in the registry order', () => {
    expect(strategies.map((s) => s.name)).toEqual(['host', 'cuda', 'uvm', 'pool', 'async', 'native', 'expandable', 'pinned', 'tiered']);
  });

  it('has the TypeScript registry flags of each strategy', () => {
    const keys = ['requiresCuda', 'capturable', 'hostMemory', 'requiresOptions', 'managedMemory', 'spillsToHost', 'peerAccess'] as const;
    for (const s of strategies) {
      const info = strategyInfo(s.name);
      for (const key of keys) expect({ strategy: s.name, key, value: s.flags[key] }).toEqual({ strategy: s.name, key, value: info[key] });
    }
  });

  it('describes each option with its kind and default', () => {
    const pool = byName.get('pool');
    expect(pool?.layer).toBe('cache');
    expect(pool?.options.map((o) => o.key)).toEqual([
      'upstream',
      'maxReservedBytes',
      'smallRequestLimit',
      'smallSegmentBytes',
      'largeSegmentRounding',
    ]);
    expect(pool?.options[0]).toMatchObject({ kind: 'choice', choices: ['cuda', 'host'], default: 'cuda' });
    expect(pool?.options[2]).toMatchObject({ kind: 'bytes', minimum: 1, default: 1 << 20 });
    expect(byName.get('uvm')?.options.find((o) => o.key === 'prefetchOnAllocate')).toMatchObject({ kind: 'boolean', default: true });
    expect(byName.get('native')?.options.find((o) => o.key === 'library')).toMatchObject({ kind: 'text', required: true });
    for (const s of strategies) for (const o of s.options) expect(o.help.length).toBeGreaterThan(0);
  });

  it('rejects an unknown option with the keys its descriptor lists', () => {
    const { Resource } = loadNative() as unknown as { Resource: new (spec: object) => { dispose(): void } };
    for (const s of strategies) {
      const known = s.options.map((o) => o.key).join(', ');
      expect(() => new Resource({ strategy: s.name, options: { bogusKey: 1 } })).toThrow(
        `Unknown option 'bogusKey' in the options of '${s.name}'; expected one of: ${known}`,
      );
    }
  });
});
