/**
 * The 'plugin' strategy: a plug-in library (gpumem/plugin.h) behind createAllocator. Its older name
 * 'native', a deprecated alias; option checks and their messages, errors from loading that name the
 * library, and the example slab library (examples/cpp) on host memory with the native layers,
 * statistics and the native replay loop. The conformance suite runs over it too (tests/allocators.ts).
 */
import { relative } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createAllocator,
  hasAllocator,
  HostAllocator,
  isOutOfMemory,
  listAllocators,
  NativePluginAllocator,
  PluginAllocator,
  pluginOptionString,
  registerAllocator,
  registerDeprecatedAlias,
  strategyInfo,
  type OutOfMemoryError,
} from '@gpumem/allocator-core';
import { replayNative } from '@gpumem/allocator-core/tools';
import { exampleSlabLibrary } from './plugin-library.js';

const host = (options: Record<string, unknown> = {}) =>
  createAllocator('plugin', { library: exampleSlabLibrary, device: 'host', ...options }) as PluginAllocator;

// First in the file: the deprecation is said once per process, on the first creation by the old name.
describe("'native', the older name of 'plugin' (deprecated, kept for one release)", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('creates the plug-in strategy, saying once that the name is deprecated and what to use', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const made = [0, 1].map(() => createAllocator('native', { library: exampleSlabLibrary, device: 'host' }));
    try {
      for (const a of made) {
        expect(a).toBeInstanceOf(PluginAllocator);
        expect(a.name).toBe('plugin');
      }
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn).toHaveBeenCalledWith("The allocator name 'native' is deprecated and will be removed in the next release; use 'plugin'", {
        type: 'DeprecationWarning',
        code: 'GPUMEM_ALLOCATOR_ALIAS',
      });
      host().dispose(); // the new name says nothing
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      for (const a of made) a.dispose();
    }
  });

  it("is the same strategy to the registry, which lists it once, as 'plugin'", () => {
    expect(hasAllocator('native')).toBe(true);
    expect(strategyInfo('native')).toEqual(strategyInfo('plugin'));
    const names = listAllocators().map((a) => a.name);
    expect(names).toContain('plugin');
    expect(names).not.toContain('native');
    // The old exported names are the new classes and types.
    expect(NativePluginAllocator).toBe(PluginAllocator);
  });

  it('checks options and refuses them as the new name does', () => {
    expect(() => createAllocator('native', { library: exampleSlabLibrary, librar: 'x' } as never)).toThrow(
      /Unknown option 'librar' for the 'plugin' allocator/,
    );
  });

  it('cannot be taken by another strategy, nor an alias be registered over a strategy', () => {
    const factory = () => new HostAllocator();
    const info = { description: 'x', requiresCuda: false };
    expect(() => registerAllocator('native', factory, info)).toThrow(
      "'native' is the deprecated name of the registered allocator 'plugin'",
    );
    expect(() => registerDeprecatedAlias('native', 'host')).toThrow("An allocator named 'native' is already registered");
    expect(() => registerDeprecatedAlias('host', 'plugin')).toThrow("An allocator named 'host' is already registered");
    expect(() => registerDeprecatedAlias('old-thing', 'no-such-strategy')).toThrow(RangeError);
    expect(() => registerDeprecatedAlias('Bad Name', 'plugin')).toThrow(TypeError);
    registerDeprecatedAlias('native', 'plugin'); // the same alias again: another copy of the core
    expect(strategyInfo('native').name).toBe('plugin');
  });
});

describe("'plugin' options", () => {
  it('is registered as a strategy that needs options and takes the native layers', () => {
    expect(strategyInfo('plugin')).toMatchObject({ name: 'plugin', requiresCuda: false, nativeLayers: true, requiresOptions: true });
    expect(
      listAllocators()
        .filter((a) => !a.requiresOptions)
        .map((a) => a.name),
    ).not.toContain('plugin');
  });

  it('turns an options object into the key=value string and passes a string as is', () => {
    expect(pluginOptionString(undefined)).toBe('');
    expect(pluginOptionString('slab_bytes=1MiB;max_class=4096')).toBe('slab_bytes=1MiB;max_class=4096');
    expect(pluginOptionString({ slab_bytes: 1048576, verbose: true, mode: 'fast', 'x.y-z': 1.5 })).toBe(
      'slab_bytes=1048576;verbose=true;mode=fast;x.y-z=1.5',
    );
  });

  it.each<[string, unknown, ErrorConstructor, RegExp]>([
    ['a number', 42, TypeError, /Expected a string 'key=value;key=value' or an object .* for options but received 42 of type number/],
    ['an array', ['a=1'], TypeError, /for options but received an array/],
    ['a nested object', { a: { b: 1 } }, TypeError, /Expected a string, number or boolean for options.a but received an object/],
    ['NaN', { a: Number.NaN }, RangeError, /Expected a finite number for options.a but received NaN/],
    ["a value with ';'", { a: 'x;y' }, TypeError, /Expected a string without ';' for options.a/],
    ["a key with '='", { 'a=b': 1 }, TypeError, /Expected option names .* but received 'a=b'/],
  ])('rejects %s in options', (_label, options, type, message) => {
    expect(() => pluginOptionString(options)).toThrow(type);
    expect(() => pluginOptionString(options)).toThrow(message);
    expect(() => host({ options })).toThrow(message);
  });

  it.each<[string, Record<string, unknown>, ErrorConstructor, RegExp]>([
    [
      'no library',
      {},
      TypeError,
      /Expected a non-empty string \(the path of a gpumem plug-in library\) for library but received undefined/,
    ],
    ['an empty library', { library: '' }, TypeError, /for library but received '' of type string/],
    ['a numeric library', { library: 7 }, TypeError, /for library but received 7 of type number/],
    [
      'an unknown key',
      { library: exampleSlabLibrary, librar: 'x' },
      TypeError,
      /Unknown option 'librar' for the 'plugin' allocator; expected one of: library, options, device/,
    ],
    [
      'a device name',
      { library: exampleSlabLibrary, device: 'gpu' },
      TypeError,
      /Expected 'host' or a CUDA device ordinal for device but received 'gpu'/,
    ],
    [
      'a negative device',
      { library: exampleSlabLibrary, device: -1 },
      RangeError,
      /Expected non-negative integer for device but received -1/,
    ],
    ['a bad limit', { library: exampleSlabLibrary, device: 'host', limitBytes: 0 }, RangeError, /limitBytes/],
  ])('rejects %s', (_label, options, type, message) => {
    expect(() => createAllocator('plugin', options as never)).toThrow(type);
    expect(() => createAllocator('plugin', options as never)).toThrow(message);
  });

  it('names the library and the cause when it cannot be loaded or refuses its options', () => {
    expect(() => host({ library: '/nonexistent/libslab.so' })).toThrow(
      /plugin library '\/nonexistent\/libslab\.so': cannot be loaded: .*No such file/,
    );
    expect(() => host({ options: 'colour=blue' })).toThrow(TypeError);
    expect(() => host({ options: { colour: 'blue' } })).toThrow(
      new RegExp(
        `plugin library '${exampleSlabLibrary.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}': create\\(options "colour=blue", device -1\\) failed: unknown option 'colour'`,
      ),
    );
  });

  it('resolves a relative library path from the current directory', () => {
    const a = host({ library: relative(process.cwd(), exampleSlabLibrary) });
    expect(a.library).toBe(exampleSlabLibrary);
    expect(a.device.kind).toBe('host');
    a.dispose();
  });
});

describe("'plugin' over the example slab library (host memory)", () => {
  it("reports the library's reserved bytes and upstream calls beside gpumem's exact counts", () => {
    const a = host();
    try {
      const p = a.malloc(200);
      const q = a.malloc(300);
      expect(a.stats()).toMatchObject({
        allocatedBytes: 500,
        allocCount: 2,
        reservedBytes: 2 << 20, // one 1 MiB slab per size class used: 256 B and 512 B
        upstreamAllocCount: 2,
      });
      const r = a.malloc(1000);
      expect(a.stats()).toMatchObject({ reservedBytes: 3 << 20, upstreamAllocCount: 3, largestFreeBlock: 1024 });
      for (const [ptr, n] of [
        [p, 200],
        [q, 300],
        [r, 1000],
      ] as const)
        a.free(ptr, n);
      a.trim();
      expect(a.stats()).toMatchObject({ allocatedBytes: 0, reservedBytes: 0, upstreamFreeCount: 3, peakReservedBytes: 3 << 20 });
    } finally {
      a.dispose();
    }
  });

  it("maps the library's out of memory to OutOfMemoryError naming the library, and stays usable", () => {
    const a = host({ options: { max_reserved: '1MiB' } });
    try {
      const p = a.malloc(100);
      let error: unknown;
      try {
        a.malloc(5000);
      } catch (e) {
        error = e;
      }
      expect(isOutOfMemory(error)).toBe(true);
      const oom = error as OutOfMemoryError;
      expect(oom.message).toContain(`plugin 'slab' (${exampleSlabLibrary}): out of memory allocating`);
      expect(oom.message).toContain('max_reserved');
      expect(oom.requestedBytes).toBe(5000);
      expect(oom.stats.allocatedBytes).toBe(100);
      const q = a.malloc(200);
      a.free(q, 200);
      a.free(p, 100);
      expect(a.stats().oomCount).toBe(1);
    } finally {
      a.dispose();
    }
  });

  it('takes the native layers: a limit over the library and tracking on top', () => {
    const a = host({ limitBytes: 2 << 20, trackingCapacity: 16 });
    try {
      const p = a.malloc(1 << 20);
      expect(() => a.malloc(3 << 20)).toThrow(/limit/);
      a.free(p, 1 << 20);
      expect(a.trackingEvents().events.map((e) => e.action)).toEqual(['alloc', 'oom', 'free']);
    } finally {
      a.dispose();
    }
  });

  it('runs in the native replay loop', () => {
    const a = host();
    try {
      const ops = {
        action: Uint8Array.from([0, 0, 1, 0, 1, 1]),
        slot: Uint32Array.from([0, 1, 0, 0, 1, 0]),
        bytes: Float64Array.from([256, 70_000, 256, 512, 70_000, 512]),
        stream: new Float64Array(6),
        slots: 2,
      };
      const result = replayNative(a, ops, 2);
      expect(result.passes).toHaveLength(2);
      for (const pass of result.passes) expect(pass).toMatchObject({ allocs: 3, frees: 3, ooms: 0 });
      expect(a.stats().allocatedBytes).toBe(0);
      expect(a.stats().allocCount).toBe(6);
    } finally {
      a.dispose();
    }
  });
});
