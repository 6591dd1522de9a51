/**
 * The `peerAccess` option of the GPU strategies: the CUDA devices (ordinals) that may read and write
 * an allocator's memory besides its own. Checked here before anything native, with the same
 * messages as the native check (native/include/gpumem/peer_access.hpp), which runs again when the
 * allocator is built.
 * @module
 */
import type { Device } from './device.js';
import { loadNative } from './native.js';
import { option } from './options.js';
import { describeValue } from './validate.js';

/** What the check asks of the machine; the addon's by default, a fake one in tests. */
export interface PeerAccessProbe {
  /** Number of visible CUDA devices. */
  deviceCount(): number;
  /** cudaDeviceCanAccessPeer(accessor, owner). */
  canAccessPeer(accessor: number, owner: number): boolean;
}

const addonProbe: PeerAccessProbe = {
  deviceCount: () => loadNative().deviceCount(),
  canAccessPeer: (accessor, owner) => loadNative().canAccessPeer(accessor, owner),
};

/**
 * The `peerAccess` option as far as it can be checked without its device: undefined or an array of
 * distinct non-negative integers (TypeError for a wrong type, RangeError for a wrong value).
 */
function checkPeerList(value: unknown): number[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) {
    throw new TypeError(`Expected an array of CUDA device ordinals for peerAccess but received ${describeValue(value)}`);
  }
  const peers: number[] = [];
  value.forEach((peer: unknown, i) => {
    const message = `Expected non-negative integer for peerAccess[${i}] but received ${describeValue(peer)}`;
    if (typeof peer !== 'number') throw new TypeError(message);
    if (!Number.isSafeInteger(peer) || peer < 0) throw new RangeError(message);
    if (peers.includes(peer)) throw new RangeError(`Expected distinct devices for peerAccess but cuda:${peer} is listed twice`);
    peers.push(peer);
  });
  return peers;
}

/**
 * The `peerAccess` entry of a strategy's options definition: checked as a list of distinct device
 * ordinals when the options are parsed; {@link checkPeerAccess} checks it against the device.
 */
export const peerAccessOption = option.custom(checkPeerList);

/**
 * The `peerAccess` option for memory on `device`, checked: undefined or an array of distinct
 * non-negative integers, none equal to the memory's own device, each below the device count, each
 * a device that can access `device`'s memory (cudaDeviceCanAccessPeer). Returns the list (empty
 * when the option is not given). TypeError for a wrong type, RangeError for a wrong value, each
 * naming the option; memory on the host takes no peers (TypeError).
 */
export function checkPeerAccess(value: unknown, device: Device, probe: PeerAccessProbe = addonProbe): number[] {
  const peers = checkPeerList(value) ?? [];
  if (peers.length === 0) return peers;
  if (device.kind !== 'cuda') {
    throw new TypeError('Expected peerAccess only for memory on a CUDA device but this allocator holds host memory');
  }
  const own = device.index;
  peers.forEach((peer, i) => {
    if (peer === own) {
      throw new RangeError(
        `Expected devices other than the memory's own (cuda:${own}) for peerAccess but received ${peer} at peerAccess[${i}]`,
      );
    }
  });
  const count = probe.deviceCount();
  peers.forEach((peer, i) => {
    if (peer >= count) {
      throw new RangeError(
        `Expected CUDA device ordinals below the device count (${count}) for peerAccess but received ${peer} at peerAccess[${i}]`,
      );
    }
  });
  for (const peer of peers) {
    if (!probe.canAccessPeer(peer, own)) {
      throw new RangeError(
        `Expected devices that can access cuda:${own}'s memory for peerAccess but cuda:${peer} cannot (no P2P path between them)`,
      );
    }
  }
  return peers;
}

/** The spec field for a checked list: `{ peerAccess }` when there are peers, nothing otherwise. */
export function peerAccessSpec(peers: readonly number[]): { peerAccess?: number[] } {
  return peers.length > 0 ? { peerAccess: [...peers] } : {};
}
