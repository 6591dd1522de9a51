/**
 * The collectives a rank's training needs, behind one interface: NCCL on GPUs, and a host
 * communicator over shared memory for CPU runs (and for ranks that share one GPU). Every buffer is
 * an address the run's allocator handed out (device memory, or host memory for the 'host'
 * allocator), so the allocator under test provides the communication buffers too. Collectives are
 * stream-ordered on `stream`: NCCL enqueues them, the host communicator waits for the stream first
 * and returns when its part is done. Elements are f32.
 * @module
 */
import type { DevicePtr, Stream } from '@gpumem/allocator-core';

/** Which implementation carries the collectives. */
export type CommBackend = 'nccl' | 'host';

export interface Communicator {
  readonly backend: CommBackend;
  /** This rank, 0 .. size-1. */
  readonly rank: number;
  /** How many ranks take part. */
  readonly size: number;
  /**
   * True when the collectives may be called inside a CUDA-graph capture (NCCL): they are then
   * replayed with the graph. The host communicator needs the host, so it is not.
   */
  readonly capturable: boolean;
  /** In place: every rank's `count` elements at `buffer` become their sum over the ranks. */
  allReduce(buffer: DevicePtr, count: number, stream: Stream): void;
  /**
   * Every rank's `count` elements at `send` are written, in rank order, to `recv` on every rank
   * (`size` x `count` elements). `send` may be `recv` + rank·count·4 (in place).
   */
  allGather(send: DevicePtr, recv: DevicePtr, count: number, stream: Stream): void;
  /** Rank `root`'s `count` elements at `buffer` are written to `buffer` on every other rank. */
  broadcast(buffer: DevicePtr, count: number, root: number, stream: Stream): void;
  /**
   * Marks the group stopped, with `reason`: the other ranks' collectives throw CommAbortedError
   * instead of waiting for this one (NCCL: the communicator is aborted). Called by a rank that fails.
   */
  abort(reason: string): void;
  /**
   * Stops the group in this rank's name: every rank's collective in progress or next one throws
   * {@link CommAbortedError} ("aborted: rank 1 failed: <reason>"); so do this rank's own later ones.
   */
  abort(reason: string): void;
  /** Frees the communicator's own resources; a collective after it throws InvalidStateError. */
  dispose(): void;
}

/**
 * Thrown on every rank when the group was stopped: another rank failed or exited, or a collective
 * waited past the group's timeout. The launcher reports which rank failed first and why.
 */
export class CommAbortedError extends Error {
  /** The code the native communicators' aborted errors carry too. */
  readonly code = 'GPUMEM_COMM_ABORTED';
  constructor(message: string) {
    super(message);
    this.name = 'CommAbortedError';
  }
}
