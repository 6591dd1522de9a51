/**
 * The addon's communicators (native/src/binding/comm_functions.cpp), declared here, by the package
 * that calls them, not by the core: NCCL's unique id and communicator, the shared-memory host
 * communicator and its regions, the staging copies of the TCP communicator and the rank's
 * parent-death signal. {@link commNative} reaches them through the core's addon, checked.
 * @module
 */
import { nativeAddonPart } from '@gpumem/allocator-core';

/**
 * One rank of a native communicator (NcclComm or HostComm), or a transport in its place (the TCP
 * one): f32 collectives on addresses, ordered on a stream (a handle). Errors carry `code`:
 * GPUMEM_COMM_ABORTED when the group was stopped, GPUMEM_NCCL (with ncclResult and ncclResultName)
 * for another NCCL failure.
 */
export interface NativeComm {
  allReduce(ptr: number, count: number, stream: number): void;
  allGather(send: number, recv: number, count: number, stream: number): void;
  broadcast(ptr: number, count: number, root: number, stream: number): void;
  abort(reason: string): void;
  destroy(): void;
}

/** The addon's members that this package calls. */
export interface CommNative {
  /** ncclGetUniqueId: the 128 bytes every rank of a new NCCL communicator is given. */
  ncclUniqueId(): Uint8Array;
  /** One rank of an NCCL communicator on CUDA device `device` (blocks until all `size` ranks join). */
  NcclComm: new (
    uniqueId: Uint8Array,
    size: number,
    rank: number,
    device: number,
  ) => NativeComm;
  /** One rank of the shared-memory communicator over region `name`; device -1 for host buffers; timeoutMs 0: none. */
  HostComm: new (
    name: string,
    size: number,
    rank: number,
    device: number,
    timeoutMs: number,
  ) => NativeComm;
  /**
   * Creates a shared-memory region for `size` ranks (slots of slotBytes) and returns its name;
   * with unlinkWhenAttached, the name is removed once every rank has attached.
   */
  hostCommRegionCreate(size: number, slotBytes: number, unlinkWhenAttached: boolean): string;
  /** Aborts the region's group in the name of `rank` (-1: no rank); the first abort wins. */
  hostCommRegionAbort(name: string, rank: number, reason: string): void;
  /** Removes the region's name; false when there was none. */
  hostCommRegionUnlink(name: string): boolean;
  /** Copies `target.length` f32 from `ptr` (on `device`, -1: the host) into `target`, ordered on `stream`. */
  commStageOut(ptr: number, device: number, stream: number, target: Float32Array): void;
  /** Copies `source` to `ptr` (on `device`, -1: the host), ordered on `stream`. */
  commStageIn(ptr: number, device: number, stream: number, source: Float32Array): void;
  /** Asks the kernel to end this process when `parentPid` ends (Linux); feature-detected, so optional. */
  dieWithParent?(parentPid: number): 'armed' | 'orphaned' | 'unsupported';
}

const required = [
  'ncclUniqueId',
  'NcclComm',
  'HostComm',
  'hostCommRegionCreate',
  'hostCommRegionAbort',
  'hostCommRegionUnlink',
  'commStageOut',
  'commStageIn',
] as const satisfies readonly (keyof CommNative)[];

/** The addon's communicators, each required member checked to be there (an older addon is a clear error). */
export function commNative(): CommNative {
  return nativeAddonPart<CommNative>('@gpumem/distributed', required);
}
