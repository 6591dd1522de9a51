/**
 * The native core's strategy descriptors (native/include/gpumem/strategy_registry.hpp), as the
 * addon's strategies() lists them, are the source of the TypeScript strategies: each strategy
 * package's options.generated.ts is what scripts/sync-strategies.mjs makes of its descriptor, the
 * options each allocator takes are the descriptor's (plus device, peerAccess, the native layers and
 * what the package adds), and the registry's flags are the descriptor's. Nothing here lists the
 * strategies or their options: every check walks the registry.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  checkAllocatorOptions,
  createAllocator,
  hasAllocator,
  listAllocators,
  loadNative,
  type StrategyFlags,
  strategyInfo,
} from '@gpumem/allocator-core';
import '@gpumem/allocator-async';
import '@gpumem/allocator-caching';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-pinned';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-tiered';
import '@gpumem/allocator-uvm';
import { generatedStrategies, syncStrategies, syncStrategiesCommand, type NativeStrategyInfo } from '../scripts/sync-strategies.mjs';

const strategies = (loadNative() as unknown as { strategies(): NativeStrategyInfo[] }).strategies();
const generated = generatedStrategies(undefined, strategies);

/** The TypeScript registry's name of a native strategy: its own, else one of its older names. */
function registeredName(s: NativeStrategyInfo): string | undefined {
  return [s.name, ...(s.aliases ?? [])].find((name) => hasAllocator(name));
}

// The generator formats its output with biome, a dev-only tool (GPU hosts run a pack without it).
const noBiome = existsSync(fileURLToPath(new URL('../node_modules/.bin/biome', import.meta.url)))
  ? undefined
  : 'biome, which formats the generated files, is not installed here';

describe('native strategy descriptors', () => {
  const staleTitle = 'generated each strategy package its options.generated.ts, and none is stale';
  it.skipIf(noBiome !== undefined)(noBiome ? `${staleTitle} [skipped: ${noBiome}]` : staleTitle, () => {
    expect(generated.length).toBeGreaterThan(0);
    const stale = syncStrategies(undefined, { check: true, descriptors: strategies });
    expect(stale, `stale generated files (run ${syncStrategiesCommand})`).toEqual([]);
  });

  it('registers every strategy package under its descriptor, with its description and flags', () => {
    for (const { descriptor } of generated) {
      const info = strategyInfo(descriptor.name);
      expect({ name: descriptor.name, description: info.description, nativeLayers: info.nativeLayers }).toEqual({
        name: descriptor.name,
        description: descriptor.description,
        nativeLayers: true,
      });
    }
  });

  it('has the TypeScript registry flags of each strategy TypeScript registers', () => {
    const registered = strategies.filter((s) => registeredName(s) !== undefined);
    expect(registered.length).toBeGreaterThanOrEqual(generated.length);
    for (const s of registered) {
      const info = strategyInfo(registeredName(s)!);
      // the flags JavaScript has, as the addon lists them: the registry names them, nothing here
      for (const key of Object.keys(s.flags) as (keyof StrategyFlags)[])
        expect({ strategy: s.name, key, value: s.flags[key] }).toEqual({ strategy: s.name, key, value: info[key] });
    }
  });

  it('gives each generated strategy its descriptor options, with their defaults and choices', () => {
    for (const { descriptor } of generated) {
      const known = listAllocators().find((s) => s.name === descriptor.name);
      expect(known?.nativeLayers).toBe(true);
      // An unknown key lists what the allocator takes: the descriptor's options among them, in order.
      let message = '';
      try {
        createAllocator(descriptor.name as 'pool', { bogusKey: 1 } as never);
      } catch (e) {
        message = (e as Error).message;
      }
      const listed = message.slice(message.indexOf('expected one of: ') + 'expected one of: '.length).split(', ');
      const own = descriptor.options.map((o) => o.key);
      expect(listed.filter((k) => own.includes(k))).toEqual(own);
      for (const key of ['device', 'limitBytes', 'trackingCapacity', 'faultInjection']) expect(listed).toContain(key);
      expect(listed.includes('peerAccess')).toBe(descriptor.flags.peerAccess);
      for (const o of descriptor.options) {
        expect(o.help.length).toBeGreaterThan(0);
        if (o.kind === 'choice') expect(o.choices?.length).toBeGreaterThan(0);
        if (o.placement) expect(o.choices).toContain('host');
      }
    }
  });

  it('rejects a bad value of each choice option, listing the choices TypeScript takes', () => {
    for (const { descriptor } of generated) {
      for (const o of descriptor.options.filter((x) => x.kind === 'choice')) {
        const choices = o.placement && !o.choices!.includes('auto') ? [...o.choices!, 'auto'] : o.choices!;
        expect(() => createAllocator(descriptor.name as 'pool', { [o.key]: 'bogus' } as never)).toThrow(
          `Expected one of ${choices.map((c) => `'${c}'`).join(', ')} for ${o.key}`,
        );
      }
    }
  });

  it("checks a strategy's options once, by the native core, without making it or needing its device", () => {
    for (const { descriptor } of generated) {
      // on any machine, a CUDA strategy's too: nothing is made
      expect(checkAllocatorOptions(descriptor.name, {})).toBe(true);
      for (const o of descriptor.options) {
        const bad = o.kind === 'boolean' || o.kind === 'text' || o.kind === 'choice' ? 7 : o.kind === 'number' ? Number.NaN : -1;
        const error = o.kind === 'bytes' || o.kind === 'count' || o.kind === 'number' ? RangeError : TypeError;
        expect(() => checkAllocatorOptions(descriptor.name, { [o.key]: bad })).toThrow(error);
        expect(() => checkAllocatorOptions(descriptor.name, { [o.key]: bad })).toThrow(`for ${o.key} but received ${bad} of type number`);
      }
    }
    expect(() => checkAllocatorOptions('async', { releaseThreshold: -1 })).toThrow(
      'Expected non-negative integer for releaseThreshold but received -1 of type number',
    );
    expect(() => checkAllocatorOptions('pool', { maxReservedBytes: '1GiB' })).toThrow(TypeError);
    expect(() => checkAllocatorOptions('pool', { bogusKey: 1 })).toThrow(/Unknown option 'bogusKey' for the 'pool' allocator/);
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
