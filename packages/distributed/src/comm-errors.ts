/**
 * The addon's communicator errors in their typed form: code GPUMEM_COMM_ABORTED becomes
 * {@link CommAbortedError}, GPUMEM_NCCL an {@link NcclError}, GPUMEM_CUDA a CudaError,
 * GPUMEM_INVALID_STATE an InvalidStateError; RangeError and TypeError pass through.
 * @module
 */
import { CudaError, InvalidStateError } from '@gpumem/allocator-core';
import { CommAbortedError } from './communicator.js';

/** An NCCL call failed for a reason other than the group being stopped. */
export class NcclError extends Error {
  override readonly name = 'NcclError';
  readonly code = 'GPUMEM_NCCL';
  constructor(
    message: string,
    /** The ncclResult_t value. */
    readonly ncclResult: number,
    /** Its name, e.g. `ncclInvalidUsage`. */
    readonly ncclResultName: string,
  ) {
    super(message);
  }
}

interface NativeCommErrorShape {
  code?: string;
  cudaError?: number;
  cudaErrorName?: string;
  ncclResult?: number;
  ncclResultName?: string;
}

/** `e` from the addon, typed; `what` (the call) prefixes every message but an abort's. */
function translateCommError(e: unknown, what: string): Error {
  if (!(e instanceof Error)) return new Error(String(e));
  const n = e as Error & NativeCommErrorShape;
  switch (n.code) {
    case 'GPUMEM_COMM_ABORTED':
      return new CommAbortedError(n.message);
    case 'GPUMEM_NCCL':
      return new NcclError(`${what}: ${n.message}`, n.ncclResult ?? -1, n.ncclResultName ?? 'unknown');
    case 'GPUMEM_CUDA':
      return new CudaError(`${what}: ${n.message}`, n.cudaError ?? -1, n.cudaErrorName ?? 'unknown');
    case 'GPUMEM_INVALID_STATE':
      return new InvalidStateError(`${what}: ${n.message}`);
    default:
      return e;
  }
}

/** Runs a call into the addon's communicators, throwing the typed errors. */
export function commCall<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw translateCommError(e, what);
  }
}
