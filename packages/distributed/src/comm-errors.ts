/**
 * The addon's communicator errors in their typed form: code GPUMEM_COMM_ABORTED becomes
 * {@link CommAbortedError}, GPUMEM_NCCL an {@link NcclError}, and the rest as the core's
 * translateNativeError has them (GPUMEM_CUDA a CudaError, GPUMEM_INVALID_STATE an
 * InvalidStateError; RangeError and TypeError pass through).
 * @module
 */
import { translateNativeError } from '@gpumem/allocator-core';
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
  ncclResult?: number;
  ncclResultName?: string;
}

/** `e` from the addon, typed; `what` (the call) prefixes every message but an abort's. */
function translateCommError(e: unknown, what: string): Error {
  if (e instanceof Error) {
    const n = e as Error & NativeCommErrorShape;
    if (n.code === 'GPUMEM_COMM_ABORTED') return new CommAbortedError(n.message);
    if (n.code === 'GPUMEM_NCCL') return new NcclError(`${what}: ${n.message}`, n.ncclResult ?? -1, n.ncclResultName ?? 'unknown');
  }
  // The addon's other errors as from any call into it (the binding wraps the communicators' own
  // around the same translation): CudaError, InvalidStateError, the rest as thrown.
  return translateNativeError(e, what);
}

/** Runs a call into the addon's communicators, throwing the typed errors. */
export function commCall<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw translateCommError(e, what);
  }
}
