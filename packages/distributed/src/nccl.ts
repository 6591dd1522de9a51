/**
 * NCCL communicators: one rank per process, each driving one GPU. NCCL is loaded at run time from
 * GPUMEM_NCCL_LIB or libnccl.so.2 (PyTorch's wheels ship one under site-packages/nvidia/nccl/lib);
 * {@link ncclLibrary} says whether it loads and why not. Rank 0 makes a {@link ncclUniqueId} and
 * hands it to every rank, which then calls {@link createNcclCommunicator}. The collectives are
 * enqueued on the stream and may be captured into a CUDA graph.
 * @module
 */
import { cudaDevice, InvalidStateError, loadNative, type NativeNcclLibrary } from '@gpumem/allocator-core';
import { checkInteger } from './check-integer.js';
import { commCall } from './comm-errors.js';
import { commNative } from './comm-native.js';
import type { Communicator } from './communicator.js';
import { NativeCommunicator } from './native-communicator.js';

/** Whether NCCL can be used here. */
export type NcclLibrary = NativeNcclLibrary;

/**
 * Whether NCCL loads, from which file, its version code (e.g. 22703 for 2.27.3), or why not.
 * Never throws. Until it loads, every call tries again (so a changed GPUMEM_NCCL_LIB counts).
 */
export function ncclLibrary(): NcclLibrary {
  try {
    return loadNative().ncclLibrary();
  } catch (e) {
    return { available: false, reason: e instanceof Error ? e.message : String(e) };
  }
}

function requireNccl(what: string): void {
  const library = ncclLibrary();
  if (!library.available) throw new InvalidStateError(`${what}: ${library.reason ?? 'NCCL is not available'}`);
}

/** ncclGetUniqueId: the 128 bytes that identify a new communicator; give the same to every rank. */
export function ncclUniqueId(): Uint8Array {
  requireNccl('ncclUniqueId');
  return new Uint8Array(commCall('ncclUniqueId', () => commNative().ncclUniqueId()));
}

export interface NcclCommunicatorOptions {
  /** From {@link ncclUniqueId} on one rank, the same on all. */
  uniqueId: Uint8Array;
  rank: number;
  size: number;
  /** The CUDA device this rank drives. */
  device: number;
}

/**
 * This rank of an NCCL communicator (ncclCommInitRank on `device`): blocks until all `size` ranks
 * have joined. Backend 'nccl', capturable.
 */
export function createNcclCommunicator(options: NcclCommunicatorOptions): Communicator {
  if (options === null || typeof options !== 'object') throw new TypeError('Expected an options object for createNcclCommunicator');
  const { uniqueId, rank, size, device } = options;
  if (!(uniqueId instanceof Uint8Array) || uniqueId.byteLength !== 128) {
    throw new TypeError('Expected the 128-byte Uint8Array from ncclUniqueId() for uniqueId');
  }
  checkInteger(size, 'size', 1, Infinity);
  checkInteger(rank, 'rank', 0, size - 1);
  checkInteger(device, 'device', 0, Infinity);
  requireNccl('createNcclCommunicator');
  const cuda = cudaDevice(device);
  const native = commCall('createNcclCommunicator', () => new (commNative().NcclComm)(uniqueId, size, rank, device));
  return new NativeCommunicator(native, 'nccl', rank, size, true, cuda);
}
