/**
 * commCall: what the addon's communicators throw, in its typed form: the communicators' own codes
 * here, the rest as from any other call into the addon.
 */
import { CudaError, InvalidStateError } from '@gpumem/allocator-core';
import { describe, expect, it } from 'vitest';
import { commCall } from './comm-errors.js';
import { CommAbortedError } from './communicator.js';

/** What commCall('allReduce', ...) throws for `thrown`. */
function caught(thrown: unknown): unknown {
  try {
    commCall('allReduce', () => {
      throw thrown;
    });
  } catch (e) {
    return e;
  }
  throw new Error('commCall did not throw');
}

/** An Error as the addon makes them: a message, a code and the code's fields. */
function native(message: string, fields: Record<string, unknown>): Error {
  return Object.assign(new Error(message), fields);
}

describe('commCall', () => {
  it('returns what the call returns', () => {
    expect(commCall('barrier', () => 7)).toBe(7);
  });

  it('makes an abort a CommAbortedError with the message as it is', () => {
    const e = caught(native('the group was stopped', { code: 'GPUMEM_COMM_ABORTED' }));
    expect(e).toBeInstanceOf(CommAbortedError);
    expect((e as Error).message).toBe('the group was stopped');
  });

  it('makes an NCCL failure an NcclError naming the call, with its result', () => {
    const e = caught(native('invalid usage', { code: 'GPUMEM_NCCL', ncclResult: 5, ncclResultName: 'ncclInvalidUsage' }));
    expect(e).toMatchObject({
      name: 'NcclError',
      code: 'GPUMEM_NCCL',
      message: 'allReduce: invalid usage',
      ncclResult: 5,
      ncclResultName: 'ncclInvalidUsage',
    });
  });

  it('makes a CUDA failure a CudaError and an invalid state an InvalidStateError, naming the call', () => {
    const cuda = caught(native('copy failed', { code: 'GPUMEM_CUDA', cudaError: 700, cudaErrorName: 'cudaErrorIllegalAddress' }));
    expect(cuda).toBeInstanceOf(CudaError);
    expect(cuda).toMatchObject({ message: 'allReduce: copy failed', cudaError: 700, cudaErrorName: 'cudaErrorIllegalAddress' });
    const state = caught(native('destroyed', { code: 'GPUMEM_INVALID_STATE' }));
    expect(state).toBeInstanceOf(InvalidStateError);
    expect((state as Error).message).toBe('allReduce: destroyed');
  });

  it('passes argument errors through and makes anything else thrown an Error', () => {
    const range = new RangeError('Expected a positive count');
    expect(caught(range)).toBe(range);
    const other = caught('a string');
    expect(other).toBeInstanceOf(Error);
    expect((other as Error).message).toBe('a string');
  });
});
