import { describe, expect, it } from 'vitest';
import { createAllocator, hasAllocator, listAllocators, registerAllocator, HostAllocator, strategyInfo, strategyLabel } from './index.js';

describe('registry', () => {
  it('has the core strategies registered on import', () => {
    const names = listAllocators().map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(['cuda', 'host']));
    expect(listAllocators().find((s) => s.name === 'cuda')?.requiresCuda).toBe(true);
    expect(listAllocators().find((s) => s.name === 'host')?.requiresCuda).toBe(false);
  });

  it('registers a plug-in and creates it by name with its options', () => {
    const seen: unknown[] = [];
    registerAllocator(
      'registry-test-plugin',
      (options) => {
        seen.push(options);
        return new HostAllocator();
      },
      { description: 'test', requiresCuda: false },
    );
    expect(hasAllocator('registry-test-plugin')).toBe(true);
    const a = createAllocator('registry-test-plugin', { answer: 42 });
    expect(seen).toEqual([{ answer: 42 }]);
    a.dispose();
  });

  it('rejects duplicates and malformed names', () => {
    expect(() => registerAllocator('host', () => new HostAllocator(), { description: '', requiresCuda: false })).toThrow(
      /already registered/,
    );
    expect(() => registerAllocator('Bad Name', () => new HostAllocator(), { description: '', requiresCuda: false })).toThrow(TypeError);
    expect(() => registerAllocator('no-factory', 42 as never, { description: '', requiresCuda: false })).toThrow(/factory/);
  });

  it('checks the info argument and what a factory returns', () => {
    expect(() => registerAllocator('no-info', () => new HostAllocator(), undefined as never)).toThrow(
      /Expected an object \{ description, requiresCuda, .* \} for info but received undefined/,
    );
    expect(() =>
      registerAllocator('bad-flag', () => new HostAllocator(), { description: 'x', requiresCuda: false, capturable: 'yes' as never }),
    ).toThrow(/boolean for info.capturable/);
    expect(hasAllocator('no-info')).toBe(false);
    registerAllocator('returns-42', () => 42 as never, { description: 'broken', requiresCuda: false });
    expect(() => createAllocator('returns-42')).toThrow(/returned number, not an Allocator/);
  });

  it('carries capability flags: capturable and host memory', () => {
    registerAllocator('flagged-plugin', () => new HostAllocator(), {
      description: 'x',
      requiresCuda: false,
      capturable: true,
      hostMemory: true,
    });
    expect(strategyInfo('flagged-plugin')).toMatchObject({ capturable: true, hostMemory: true, nativeLayers: false });
    expect(strategyInfo('host')).toMatchObject({ hostMemory: true, capturable: false });
    expect(strategyInfo('cuda')).toMatchObject({ hostMemory: false, capturable: false });
  });

  it('carries the options of a host twin, checked and copied', () => {
    const twin = { upstream: 'host' };
    registerAllocator('twinned-plugin', () => new HostAllocator(), { description: 'x', requiresCuda: false, hostTwinOptions: twin });
    twin.upstream = 'changed';
    expect(strategyInfo('twinned-plugin').hostTwinOptions).toEqual({ upstream: 'host' });
    expect(Object.isFrozen(strategyInfo('twinned-plugin').hostTwinOptions)).toBe(true);
    expect(strategyInfo('host').hostTwinOptions).toBeUndefined();
    for (const bad of [null, 'host', ['host']])
      expect(() =>
        registerAllocator('bad-twin', () => new HostAllocator(), { description: 'x', requiresCuda: false, hostTwinOptions: bad as never }),
      ).toThrow(/Expected an object of options for info.hostTwinOptions/);
    expect(hasAllocator('bad-twin')).toBe(false);
  });

  it('labels a strategy by the allocator it reproduces, where it says', () => {
    registerAllocator('modelling-plugin', () => new HostAllocator(), { description: 'x', requiresCuda: false, models: "X's allocator" });
    expect(strategyInfo('modelling-plugin').models).toBe("X's allocator");
    expect(strategyLabel(strategyInfo('modelling-plugin'))).toBe("modelling-plugin (X's allocator)");
    expect(strategyLabel(strategyInfo('host'))).toBe('host');
    for (const bad of ['', 3])
      expect(() =>
        registerAllocator('bad-model', () => new HostAllocator(), { description: 'x', requiresCuda: false, models: bad as never }),
      ).toThrow(/Expected a non-empty string for info.models/);
    expect(hasAllocator('bad-model')).toBe(false);
  });

  it('names the registered strategies when asked for an unknown one', () => {
    expect(() => createAllocator('nope')).toThrow(RangeError);
    expect(() => createAllocator('nope')).toThrow(/registered: .*host/);
  });

  it('rejects unknown and ill-typed options, naming them', () => {
    expect(() => createAllocator('host', { limitbytes: 5 } as never)).toThrow(/Unknown option 'limitbytes'.*limitBytes/);
    expect(() => createAllocator('host', { limitBytes: -5 })).toThrow(/limitBytes/);
    expect(() => createAllocator('host', 'x' as never)).toThrow(TypeError);
  });
});
