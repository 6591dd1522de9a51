/**
 * The `peerAccess` option across the strategies: refused for host memory everywhere; on a GPU host,
 * refused for the memory's own device and for a device past the count (TypeScript and native
 * checks alike); with two devices with a P2P path, memory of every strategy allocated on cuda:0
 * with peerAccess [1] is written by a kernel on cuda:1 and read back. Skipped, with the reason in
 * the title, where there are no (or too few) devices; `npm run test:gpu` makes a missing device an
 * error.
 */
import { describe, expect, it } from 'vitest';
import {
  createAllocator,
  cudaDevice,
  deviceCount,
  listAllocators,
  loadNative,
  type NativeAllocator,
  peerTopology,
  type Allocator,
} from '@gpumem/allocator-core';
import { peerFillU32 } from '@gpumem/allocator-core/tools';
import '@gpumem/allocator-uvm';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-tiered';
import '@gpumem/allocator-pinned';
import { gpuAvailable, gpuTitle } from './gpu.js';

const MiB = 2 ** 20;
const count = deviceCount();

/** Each strategy that takes peerAccess, with the options that put its memory on a CUDA device. */
const onDevice: Array<[string, Record<string, unknown>]> = [
  ['cuda', {}],
  ['pool', { upstream: 'cuda' }],
  ['async', {}],
  ['uvm', { limitBytes: 256 * MiB }],
  ['expandable', { upstream: 'cuda' }],
  ['tiered', { upstream: 'cuda' }],
  ['pinned', { upstream: 'pinned' }],
];

function use<T>(a: Allocator, f: (a: Allocator) => T): T {
  try {
    return f(a);
  } finally {
    a.dispose();
  }
}

describe('peerAccess: memory on the host takes no peers', () => {
  it.each([
    ['pool', { upstream: 'host' }],
    ['expandable', { upstream: 'host' }],
    ['tiered', { upstream: 'host' }],
    ['pinned', { upstream: 'host' }],
  ])('%s over the host: a TypeError naming the option', (name, options) => {
    expect(() => createAllocator(name as 'pool', { ...options, peerAccess: [1] } as never)).toThrow(TypeError);
    expect(() => createAllocator(name as 'pool', { ...options, peerAccess: [1] } as never)).toThrow(
      /^Expected peerAccess only for memory on a CUDA device/,
    );
    use(createAllocator(name as 'pool', { ...options, peerAccess: [] } as never), (a) =>
      expect((a as NativeAllocator).peerAccess).toEqual([]),
    );
  });

  it('the strategies that take it say so in the registry', () => {
    const flagged = listAllocators()
      .filter((s) => s.peerAccess)
      .map((s) => s.name)
      .sort();
    expect(flagged).toEqual(expect.arrayContaining(onDevice.map(([name]) => name).sort()));
    expect(flagged).not.toContain('host');
  });
});

describe.skipIf(!gpuAvailable)(gpuTitle('peerAccess on a GPU host'), () => {
  it.each(onDevice)("%s: the memory's own device is refused", (name, options) => {
    expect(() => createAllocator(name as 'pool', { ...options, device: 0, peerAccess: [0] } as never)).toThrow(RangeError);
    expect(() => createAllocator(name as 'pool', { ...options, device: 0, peerAccess: [0] } as never)).toThrow(
      "Expected devices other than the memory's own (cuda:0) for peerAccess but received 0 at peerAccess[0]",
    );
  });

  it.each(onDevice)('%s: a device past the count is refused, saying the count', (name, options) => {
    const message = `Expected CUDA device ordinals below the device count (${count}) for peerAccess but received ${count} at peerAccess[0]`;
    expect(() => createAllocator(name as 'pool', { ...options, peerAccess: [count] } as never)).toThrow(RangeError);
    expect(() => createAllocator(name as 'pool', { ...options, peerAccess: [count] } as never)).toThrow(message);
  });

  it('the native check refuses the same, for a spec built by hand', () => {
    const Resource = loadNative().Resource;
    expect(() => new Resource({ strategy: 'cuda', peerAccess: [count] })).toThrow(`below the device count (${count})`);
    expect(() => new Resource({ strategy: 'async', peerAccess: [0] })).toThrow("memory's own (cuda:0)");
    expect(() => new Resource({ strategy: 'expandable', peerAccess: [count] })).toThrow(`below the device count (${count})`);
  });

  it('peerTopology() lists every ordered pair, none on a one-GPU host', () => {
    const t = peerTopology();
    expect(t.deviceCount).toBe(count);
    expect(t.pairs).toHaveLength(count * (count - 1));
    if (count === 1) expect(t.pairs).toEqual([]);
    for (const p of t.pairs) expect(p.canAccessPeer).toBe(loadNative().canAccessPeer(p.from, p.to));
  });

  it.skipIf(count !== 1)(
    count === 1
      ? 'one GPU: peerAccess [1] is refused with the device count'
      : `one GPU: peerAccess [1] is refused with the device count [skipped: ${count} devices]`,
    () => {
      for (const [name, options] of onDevice) {
        expect(() => createAllocator(name as 'pool', { ...options, peerAccess: [1] } as never)).toThrow(
          'Expected CUDA device ordinals below the device count (1) for peerAccess but received 1 at peerAccess[0]',
        );
      }
    },
  );
});

/** Why the two-device suite cannot run here ('' when it can). */
function twoDeviceReason(): string {
  if (!gpuAvailable) return '';
  if (count < 2) return `needs two CUDA devices, this host has ${count}`;
  if (!loadNative().canAccessPeer(1, 0)) return 'cuda:1 cannot access cuda:0 (no P2P path between them)';
  return '';
}
const noPair = twoDeviceReason();
const twoDevices = gpuAvailable && noPair === '';
const twoTitle = (title: string) => (!gpuAvailable ? gpuTitle(title) : noPair ? `${title} [skipped: ${noPair}]` : title);

describe.skipIf(!twoDevices)(twoTitle('peerAccess with two devices: cuda:1 writes memory of cuda:0'), () => {
  const values = (1 * MiB) / 4; // u32 values

  it.each(onDevice)('%s with peerAccess [1] on cuda:0: a kernel on cuda:1 writes it, cuda:0 reads it back', (name, options) => {
    use(createAllocator(name as 'pool', { ...options, device: 0, peerAccess: [1] } as never), (a) => {
      const allocator = a as NativeAllocator;
      expect(allocator.peerAccess).toEqual([1]);
      const ptr = allocator.malloc(values * 4);
      allocator.write(ptr, new Uint32Array(values)); // zeros first, so the check sees the peer's write
      peerFillU32(allocator, ptr, values, 0xc0ffee, cudaDevice(1));
      const back = new Uint32Array(values);
      allocator.read(ptr, back);
      expect(back.every((v) => v === 0xc0ffee)).toBe(true);
      allocator.free(ptr, values * 4);
    });
  });

  it('the other way round: memory of cuda:1 with peerAccess [0] is written from cuda:0', () => {
    if (!loadNative().canAccessPeer(0, 1)) return; // a one-way path: the pair above covered the way there is
    for (const [name, options] of onDevice) {
      use(createAllocator(name as 'pool', { ...options, device: 1, peerAccess: [0] } as never), (a) => {
        const allocator = a as NativeAllocator;
        const ptr = allocator.malloc(values * 4);
        peerFillU32(allocator, ptr, values, 7, cudaDevice(0));
        const back = new Uint32Array(values);
        allocator.read(ptr, back);
        expect(
          back.every((v) => v === 7),
          name,
        ).toBe(true);
        allocator.free(ptr, values * 4);
      });
    }
  });

  it('peerTopology() reports the pair as accessible, with a link', () => {
    const t = peerTopology();
    const p = t.pairs.find((q) => q.from === 1 && q.to === 0)!;
    expect(p.canAccessPeer).toBe(true);
    expect(p.accessSupported).toBe(true);
    expect(['nvlink', 'pcie', 'unknown']).toContain(p.link);
  });
});
