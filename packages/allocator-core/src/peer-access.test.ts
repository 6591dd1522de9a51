/**
 * The `peerAccess` option's checks: the TypeScript check against a fake machine (any device count
 * and P2P matrix, so it runs without a GPU), the native spec check through the addon (the errors
 * that need no device), and the registry flag.
 */
import { describe, expect, it } from 'vitest';
import {
  checkPeerAccess,
  cudaDevice,
  deviceCount,
  hostDevice,
  loadNative,
  peerAccessSpec,
  strategyInfo,
  type Device,
  type PeerAccessProbe,
} from './index.js';

/** cuda:i without asking the addon (the check only reads kind and index). */
const gpu = (index: number): Device => ({ kind: 'cuda', index, id: `cuda:${index}` });

/** A machine of `count` devices where every pair has a P2P path except those listed. */
function machine(count: number, noPath: Array<[number, number]> = []): PeerAccessProbe {
  return {
    deviceCount: () => count,
    canAccessPeer: (accessor, owner) =>
      accessor !== owner && accessor < count && owner < count && !noPath.some(([a, o]) => a === accessor && o === owner),
  };
}

/** The error `fn` throws. */
function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a throw');
}

describe('checkPeerAccess', () => {
  it('accepts undefined and [] as no peers, and a valid list as given', () => {
    expect(checkPeerAccess(undefined, gpu(0), machine(1))).toEqual([]);
    expect(checkPeerAccess([], gpu(0), machine(1))).toEqual([]);
    expect(checkPeerAccess([], hostDevice, machine(0))).toEqual([]);
    expect(checkPeerAccess([1, 3], gpu(0), machine(4))).toEqual([1, 3]);
    expect(checkPeerAccess([0], gpu(2), machine(4))).toEqual([0]);
  });

  it('rejects what is not an array of non-negative integers with a TypeError or RangeError naming the option', () => {
    for (const bad of [1, '1,2', null, { 0: 1 }, true]) {
      const e = errorOf(() => checkPeerAccess(bad, gpu(0), machine(4)));
      expect(e).toBeInstanceOf(TypeError);
      expect(e.message).toMatch(/^Expected an array of CUDA device ordinals for peerAccess but received /);
    }
    expect(errorOf(() => checkPeerAccess(['1'], gpu(0), machine(4)))).toBeInstanceOf(TypeError);
    expect(errorOf(() => checkPeerAccess(['1'], gpu(0), machine(4))).message).toBe(
      "Expected non-negative integer for peerAccess[0] but received '1' of type string",
    );
    for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 53]) {
      const e = errorOf(() => checkPeerAccess([1, bad], gpu(0), machine(4)));
      expect(e).toBeInstanceOf(RangeError);
      expect(e.message).toMatch(/^Expected non-negative integer for peerAccess\[1\] but received /);
    }
  });

  it("rejects a device listed twice, and the memory's own device", () => {
    const twice = errorOf(() => checkPeerAccess([1, 2, 1], gpu(0), machine(4)));
    expect(twice).toBeInstanceOf(RangeError);
    expect(twice.message).toBe('Expected distinct devices for peerAccess but cuda:1 is listed twice');
    const own = errorOf(() => checkPeerAccess([0], gpu(0), machine(1)));
    expect(own).toBeInstanceOf(RangeError);
    expect(own.message).toBe("Expected devices other than the memory's own (cuda:0) for peerAccess but received 0 at peerAccess[0]");
  });

  it('rejects a device past the device count, saying the count', () => {
    const e = errorOf(() => checkPeerAccess([1], gpu(0), machine(1)));
    expect(e).toBeInstanceOf(RangeError);
    expect(e.message).toBe('Expected CUDA device ordinals below the device count (1) for peerAccess but received 1 at peerAccess[0]');
    expect(errorOf(() => checkPeerAccess([1, 7], gpu(0), machine(4))).message).toMatch(
      /below the device count \(4\).*received 7 at peerAccess\[1\]/,
    );
  });

  it("rejects a device with no P2P path to the memory's device", () => {
    const e = errorOf(() => checkPeerAccess([1, 2], gpu(0), machine(3, [[2, 0]])));
    expect(e).toBeInstanceOf(RangeError);
    expect(e.message).toBe("Expected devices that can access cuda:0's memory for peerAccess but cuda:2 cannot (no P2P path between them)");
    // The direction matters: the peer must reach the memory's device, not the other way round.
    expect(checkPeerAccess([2], gpu(0), machine(3, [[0, 2]]))).toEqual([2]);
  });

  it('rejects peers for memory on the host', () => {
    const e = errorOf(() => checkPeerAccess([1], hostDevice, machine(2)));
    expect(e).toBeInstanceOf(TypeError);
    expect(e.message).toMatch(/^Expected peerAccess only for memory on a CUDA device but this allocator holds host memory/);
  });

  it('asks the machine nothing before the list itself is well formed', () => {
    const asked: string[] = [];
    const probe: PeerAccessProbe = {
      deviceCount: () => {
        asked.push('count');
        return 4;
      },
      canAccessPeer: () => {
        asked.push('p2p');
        return true;
      },
    };
    expect(() => checkPeerAccess([1, -1], gpu(0), probe)).toThrow(RangeError);
    expect(() => checkPeerAccess([0], gpu(0), probe)).toThrow(RangeError);
    expect(asked).toEqual([]);
  });

  it('peerAccessSpec adds the field only when there are peers', () => {
    expect(peerAccessSpec([])).toEqual({});
    expect(peerAccessSpec([1, 2])).toEqual({ peerAccess: [1, 2] });
  });

  it('the addon is the default probe: on this machine a device past the count is refused saying the count', () => {
    const count = deviceCount();
    const device = count > 0 ? cudaDevice(0) : gpu(0);
    const e = errorOf(() => checkPeerAccess([count + 1], device));
    expect(e.message).toContain(`below the device count (${count})`);
  });
});

describe('peerAccess in the native spec (checked again by the chain builder)', () => {
  const native = () => loadNative();
  const create = (spec: Record<string, unknown>) => () => new (native().Resource)(spec as never).dispose();

  it('takes an array of ordinals and names the option when it is not one', () => {
    expect(create({ strategy: 'cuda', peerAccess: 'x' })).toThrow(
      /^Expected an array of CUDA device ordinals for peerAccess but received 'x' of type string$/,
    );
    expect(create({ strategy: 'cuda', peerAccess: [1.5] })).toThrow(
      /^Expected non-negative integer for peerAccess\[0\] but received 1\.5 of type number$/,
    );
    expect(create({ strategy: 'cuda', peerAccess: [1, 1] })).toThrow(
      /^Expected distinct devices for peerAccess but cuda:1 is listed twice$/,
    );
    expect(create({ strategy: 'cuda', peerAccess: [0] })).toThrow(/memory's own \(cuda:0\)/);
    const past = native().deviceCount() + 1; // never the memory's own device 0
    expect(create({ strategy: 'async', peerAccess: [past] })).toThrow(
      `below the device count (${past - 1}) for peerAccess but received ${past} at peerAccess[0]`,
    );
  });

  it('refuses peers for memory on the host, whatever the device count', () => {
    expect(create({ strategy: 'host', peerAccess: [1] })).toThrow(
      /^Expected peerAccess only for memory on a CUDA device but 'host' memory/,
    );
    expect(create({ strategy: 'pool', options: { upstream: 'host' }, peerAccess: [1] })).toThrow(/'pool' over upstream 'host'/);
    expect(create({ strategy: 'pinned', options: { upstream: 'host' }, peerAccess: [1] })).toThrow(/'pinned' over upstream 'host'/);
    expect(create({ strategy: 'expandable', device: -1, peerAccess: [1] })).toThrow(/'expandable' over the host twin/);
    expect(create({ strategy: 'tiered', options: { upstream: 'host' }, peerAccess: [1] })).toThrow(/'tiered' over the host twin/);
    expect(create({ strategy: 'pool', options: { upstream: 'host' }, peerAccess: [] })).not.toThrow();
  });
});

describe('the peerAccess registry flag', () => {
  it('is set for the strategies over device memory and not for the host ones', () => {
    expect(strategyInfo('cuda').peerAccess).toBe(true);
    expect(strategyInfo('host').peerAccess).toBe(false);
    expect(strategyInfo('plugin').peerAccess).toBe(false);
  });
});
