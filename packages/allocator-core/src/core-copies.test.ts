/**
 * Two copies of the core in one process, as when a plug-in installed in its own folder brings its
 * own @gpumem/allocator-core: the second copy is the same source evaluated again (vi.resetModules),
 * so every module-level value is new, as it is for a copy at another path.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Allocator, AllocatorStats, DevicePtr, Stream } from './index.js';

type Core = typeof import('./index.js');

async function twoCopies(): Promise<[Core, Core]> {
  const first = await import('./index.js');
  vi.resetModules();
  const second = await import('./index.js');
  // really two copies: the functions and classes are not the same objects
  expect(second.registerAllocator).not.toBe(first.registerAllocator);
  expect(second.OutOfMemoryError).not.toBe(first.OutOfMemoryError);
  return [first, second];
}

/** A strategy written against `core` (the plug-in's copy) that passes every call to its upstream. */
function passThroughStrategy(core: Core) {
  return class PassThrough extends core.BaseAllocator {
    readonly upstream: Allocator;
    constructor(upstream: string) {
      const made = core.createAllocator(upstream);
      super('pass-through', made.device);
      this.upstream = made;
    }
    protected doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
      return this.upstream.malloc(bytes, stream);
    }
    protected doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void {
      this.upstream.free(ptr, bytes, stream);
    }
    protected doWrite(ptr: DevicePtr, data: ArrayBufferView, offset: number, stream: Stream | undefined): void {
      this.upstream.write(ptr, data, offset, stream);
    }
    protected doRead(ptr: DevicePtr, target: ArrayBufferView, offset: number, stream: Stream | undefined): void {
      this.upstream.read(ptr, target, offset, stream);
    }
    protected doStats(): AllocatorStats {
      return this.upstream.stats();
    }
    protected doResetPeak(): void {
      this.upstream.resetPeak();
    }
    protected doDispose(): void {
      this.upstream.dispose();
    }
  };
}

const registryKey = Symbol.for('gpumem.allocator-registry');

describe('two copies of @gpumem/allocator-core in one process', () => {
  it("share one registry: the second copy's import registers no built-in twice, and a plug-in it registers is the first's", async () => {
    const [app, plugin] = await twoCopies();
    const names = app.listAllocators().map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(['cuda', 'host']));
    expect(plugin.listAllocators().map((s) => s.name)).toEqual(names);
    expect(new Set(names).size).toBe(names.length);

    const PassThrough = passThroughStrategy(plugin);
    plugin.registerAllocator('copies-pass-through', () => new PassThrough('host'), { description: 'test', requiresCuda: false });
    expect(app.hasAllocator('copies-pass-through')).toBe(true);
    const a = app.createAllocator('copies-pass-through');
    const p = a.malloc(1000);
    expect(a.stats().allocatedBytes).toBe(1000);
    a.free(p, 1000);
    a.dispose();
  });

  it('still reject a name taken, from either copy, saying when it is a built-in', async () => {
    const [app, plugin] = await twoCopies();
    const host = () => new app.HostAllocator();
    expect(() => plugin.registerAllocator('host', host, { description: '', requiresCuda: false })).toThrow(
      /'host' is already registered \(one of @gpumem\/allocator-core's own strategies\)/,
    );
    app.registerAllocator('copies-taken', host, { description: '', requiresCuda: false });
    expect(() => plugin.registerAllocator('copies-taken', host, { description: '', requiresCuda: false })).toThrow(
      /^An allocator named 'copies-taken' is already registered$/,
    );
  });

  it("share the creation state: a plug-in copy's leaves are wrapped by the application's createAllocatorWrappingLeaves", async () => {
    const [app, plugin] = await twoCopies();
    const PassThrough = passThroughStrategy(plugin);
    plugin.registerAllocator('copies-wrapped', () => new PassThrough('host'), { description: 'test', requiresCuda: false });
    const wrappedNames: string[] = [];
    const { allocator, wrappedLeaves } = app.createAllocatorWrappingLeaves('copies-wrapped', {}, (leaf, leafName) => {
      wrappedNames.push(leafName);
      return leaf;
    });
    expect(wrappedLeaves).toBe(1);
    expect(wrappedNames).toEqual(['host']);
    allocator.dispose();
  });

  it("take each other's errors with instanceof, class by class", async () => {
    const [app, plugin] = await twoCopies();
    const stats = new app.HostAllocator().stats();
    const oom = new plugin.OutOfMemoryError('no room', 10, stats, 'pass-through');
    expect(oom).toBeInstanceOf(app.OutOfMemoryError);
    expect(oom).toBeInstanceOf(Error);
    expect(app.isOutOfMemory(oom)).toBe(true);
    expect(new app.OutOfMemoryError('no room', 10, stats, 'x')).toBeInstanceOf(plugin.OutOfMemoryError);
    expect(new plugin.CudaError('failed', 2, 'cudaErrorMemoryAllocation')).toBeInstanceOf(app.CudaError);
    expect(new plugin.InvalidStateError('disposed')).toBeInstanceOf(app.InvalidStateError);
    expect(new plugin.NativeLoadError('none', [])).toBeInstanceOf(app.NativeLoadError);
    // a brand is per class
    expect(new plugin.CudaError('failed', 2, 'x')).not.toBeInstanceOf(app.OutOfMemoryError);
    expect(new plugin.InvalidStateError('x')).not.toBeInstanceOf(app.CudaError);
    expect(new Error('plain')).not.toBeInstanceOf(app.OutOfMemoryError);
    expect({ code: 'GPUMEM_OOM' }).not.toBeInstanceOf(app.OutOfMemoryError);
    // a subclass of either copy's class is an instance of both copies' base, and only of itself
    class AppOom extends app.OutOfMemoryError {}
    expect(new AppOom('x', 1, stats, 'y')).toBeInstanceOf(plugin.OutOfMemoryError);
    expect(oom).not.toBeInstanceOf(AppOom);
  });

  it("take each other's streams, with host stream handles unique across copies", async () => {
    const [app, plugin] = await twoCopies();
    const PassThrough = passThroughStrategy(plugin);
    const a = new PassThrough('host');
    const s = app.Stream.create(app.hostDevice);
    const t = plugin.Stream.create(plugin.hostDevice);
    try {
      expect(s).toBeInstanceOf(plugin.Stream);
      expect(t).toBeInstanceOf(app.Stream);
      expect(s.handle).not.toBe(t.handle);
      const p = a.malloc(4096, s);
      a.write(p, new Uint8Array(4096).fill(7), 0, s);
      const back = new Uint8Array(4096);
      a.read(p, back, 0, s);
      expect(back.every((x) => x === 7)).toBe(true);
      a.free(p, 4096, s);
      expect(() => a.malloc(10, {} as Stream)).toThrow(TypeError);
    } finally {
      s.destroy();
      t.destroy();
      a.dispose();
    }
  });

  it('load the native addon once', async () => {
    const [app, plugin] = await twoCopies();
    expect(plugin.loadNative()).toBe(app.loadNative());
  });
});

describe('a copy of the core whose shared registry has another shape', () => {
  let saved: PropertyDescriptor | undefined;
  afterEach(() => {
    if (saved) Object.defineProperty(globalThis, registryKey, saved);
    saved = undefined;
    vi.resetModules(); // the failed import stays cached otherwise
  });

  async function importOver(existing: unknown): Promise<unknown> {
    await import('./index.js');
    saved = Object.getOwnPropertyDescriptor(globalThis, registryKey);
    Object.defineProperty(globalThis, registryKey, { value: existing, configurable: true });
    vi.resetModules();
    return import('./registry.js').then(
      () => undefined,
      (e: unknown) => e,
    );
  }

  it('fails at import, naming both copies, their versions and paths', async () => {
    const error = (await importOver(
      Object.freeze({ version: 2, owner: { path: '/srv/app/node_modules/@gpumem/allocator-core/', version: '2.0.0' }, value: {} }),
    )) as Error & { code?: string };
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe('GPUMEM_INCOMPATIBLE_CORE');
    expect(error.message).toMatch(/^Two incompatible copies of @gpumem\/allocator-core are loaded in this process: /);
    expect(error.message).toContain('2.0.0 at /srv/app/node_modules/@gpumem/allocator-core/ (allocator-registry version 2), loaded first');
    const here = fileURLToPath(new URL('..', import.meta.url));
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(error.message).toContain(`${version} at ${here} (allocator-registry version 1)`);
    expect(error.message).toMatch(/peerDependency/);
  });

  it('fails at import when an unversioned registry is there', async () => {
    const error = (await importOver(new Map())) as Error;
    expect(error.message).toMatch(/\(allocator-registry version unversioned\)/);
  });
});
