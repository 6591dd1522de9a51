/**
 * The host communicator: collectives between the processes of one machine through a POSIX
 * shared-memory region. The parent (the launcher) creates the region with
 * {@link createHostCommRegion} and gives each rank its name; each rank attaches with
 * {@link attachHostCommunicator}. Buffers are the host allocator's memory, or device memory
 * (staged through the host) for ranks whose device is a GPU, e.g. several ranks on one GPU. Sums
 * are taken in rank order on every rank, so all ranks get bit-identical results. The parent's
 * abort(rank, reason), a rank's abort, or a wait past timeoutMs stops every rank with
 * CommAbortedError.
 * @module
 */
import { hostDevice, InvalidStateError, type Device } from '@gpumem/allocator-core';
import { checkInteger } from './check-integer.js';
import { commCall } from './comm-errors.js';
import { commNative } from './comm-native.js';
import type { Communicator } from './communicator.js';
import { NativeCommunicator } from './native-communicator.js';

export interface HostCommRegionOptions {
  /** How many ranks take part (1 .. 4096). */
  ranks: number;
  /** Bytes of each rank's slot (a multiple of 4, at least 64; default 4 MiB). Larger collectives go in chunks. */
  slotBytes?: number;
  /**
   * Remove the region's name as soon as every rank has attached (the rank completing the group
   * does it), so that nothing is left in /dev/shm once the processes mapping it are gone, even when
   * the parent is killed. Ranks cannot attach again afterwards. The parent can still abort the
   * group. Default false (the name stays until dispose()).
   */
  unlinkWhenAttached?: boolean;
}

/** The parent's handle on a region. */
export interface HostCommRegion {
  /** What ranks attach to. */
  readonly name: string;
  readonly ranks: number;
  readonly slotBytes: number;
  /**
   * Stops the group: every rank throws CommAbortedError "aborted: rank <rank> failed: <reason>"
   * (rank -1: "aborted: <reason>"). The first abort, from here or from a rank, wins.
   */
  abort(rank: number, reason: string): void;
  /** Removes the region's name and the parent's mapping; ranks already attached keep working. Idempotent. */
  dispose(): void;
}

export interface HostCommunicatorOptions {
  /** The region's name, from {@link createHostCommRegion}. */
  name: string;
  rank: number;
  /** The region's rank count. */
  size: number;
  /** Where the buffers live: hostDevice, or a CUDA device (staged through the host). Default hostDevice. */
  device?: Device;
  /** The longest a collective waits for the other ranks before the group is stopped; 0 (default): no limit. */
  timeoutMs?: number;
}

const MiB = 2 ** 20;

function checkString(value: unknown, name: string): asserts value is string {
  if (typeof value !== 'string') throw new TypeError(`Expected string for ${name} but received ${String(value)} of type ${typeof value}`);
}

/** Creates a region for `ranks` ranks under a new unique name (parent side). */
export function createHostCommRegion(options: HostCommRegionOptions): HostCommRegion {
  if (options === null || typeof options !== 'object') throw new TypeError('Expected an options object for createHostCommRegion');
  const { ranks, slotBytes = 4 * MiB, unlinkWhenAttached = false } = options;
  checkInteger(ranks, 'ranks', 1, 4096);
  checkInteger(slotBytes, 'slotBytes', 64, 2 ** 40);
  if (slotBytes % 4 !== 0) throw new RangeError(`Expected a multiple of 4 for slotBytes but received ${slotBytes}`);
  if (typeof unlinkWhenAttached !== 'boolean')
    throw new TypeError(
      `Expected boolean for unlinkWhenAttached but received ${String(unlinkWhenAttached)} of type ${typeof unlinkWhenAttached}`,
    );
  const native = commNative();
  const name = commCall('createHostCommRegion', () => native.hostCommRegionCreate(ranks, slotBytes, unlinkWhenAttached));
  let disposed = false;
  return {
    name,
    ranks,
    slotBytes,
    abort(rank: number, reason: string): void {
      if (disposed) throw new InvalidStateError(`host communicator region ${name}: abort after dispose()`);
      checkInteger(rank, 'rank', -1, ranks - 1);
      checkString(reason, 'reason');
      commCall('abort', () => native.hostCommRegionAbort(name, rank, reason));
    },
    dispose(): void {
      if (disposed) return;
      disposed = true;
      commCall('dispose', () => native.hostCommRegionUnlink(name));
    },
  };
}

/** This rank's communicator over the region `name` (rank side). Backend 'host', not capturable. */
export function attachHostCommunicator(options: HostCommunicatorOptions): Communicator {
  if (options === null || typeof options !== 'object') throw new TypeError('Expected an options object for attachHostCommunicator');
  const { name, rank, size, device = hostDevice, timeoutMs = 0 } = options;
  checkString(name, 'name');
  checkInteger(size, 'size', 1, 4096);
  checkInteger(rank, 'rank', 0, size - 1);
  checkInteger(timeoutMs, 'timeoutMs', 0, Infinity);
  const d = device as Partial<Device> | null;
  if (d === null || typeof d !== 'object' || (d.kind !== 'host' && d.kind !== 'cuda') || !Number.isInteger(d.index)) {
    throw new TypeError('Expected a Device (cudaDevice(i) or hostDevice) for device');
  }
  const index = device.kind === 'host' ? -1 : device.index;
  const native = commCall('attachHostCommunicator', () => new (commNative().HostComm)(name, size, rank, index, timeoutMs));
  return new NativeCommunicator(native, 'host', rank, size, false, device);
}
