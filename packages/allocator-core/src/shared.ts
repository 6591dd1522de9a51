/**
 * One native allocator shared by several worker_threads. Each thread loads the addon itself; the
 * allocator's native chain (its pool, statistics and locks) is one object in the process, which
 * {@link NativeAllocator.shareHandle} makes reachable from other threads by a token.
 *
 * ```ts
 * // main thread
 * const pool = createAllocator('pool', { upstream: 'host' }) as NativeAllocator;
 * new Worker(url, { workerData: pool.shareHandle() });
 * // worker
 * const pool = attachSharedAllocator(workerData); // same memory; dispose() only detaches
 * ```
 * @module
 */
import { cudaDevice, hostDevice, type Device } from './device.js';
import { NativeAllocator, type SharedAllocatorHandle } from './native-allocator.js';
import { checkOneOf } from './validate.js';

/** An allocator attached to a chain another thread shared. dispose() lets go of this thread's share only. */
export class AttachedAllocator extends NativeAllocator {
  /** The token it attached with. */
  readonly token: number;

  constructor(handle: SharedAllocatorHandle) {
    checkHandle(handle);
    super(handle.name, deviceOf(handle.device), { type: 'shared', token: handle.token });
    this.token = handle.token;
  }
}

/**
 * Attaches to a native allocator shared by another thread with `shareHandle()`. The result works
 * on the same memory: pointers from any thread can be freed (once no thread uses them any more),
 * and stats() counts every thread's calls. Its dispose() only detaches; the memory is freed when
 * the sharing allocator and every attached one have been disposed.
 * Throws TypeError/RangeError for a malformed handle, InvalidStateError when the allocator that
 * shared it has been disposed.
 */
export function attachSharedAllocator(handle: SharedAllocatorHandle): AttachedAllocator {
  return new AttachedAllocator(handle);
}

function checkHandle(handle: unknown): asserts handle is SharedAllocatorHandle {
  if (handle === null || typeof handle !== 'object') {
    throw new TypeError(`Expected a handle from shareHandle() for handle but received ${handle === null ? 'null' : typeof handle}`);
  }
  const h = handle as Partial<SharedAllocatorHandle>;
  if (typeof h.token !== 'number' || !Number.isSafeInteger(h.token) || h.token <= 0) {
    throw new RangeError(`Expected a positive integer for handle.token but received ${String(h.token)}`);
  }
  if (typeof h.name !== 'string' || h.name === '') {
    throw new TypeError(`Expected a strategy name for handle.name but received ${String(h.name)}`);
  }
  if (h.device === null || typeof h.device !== 'object') {
    throw new TypeError(`Expected { kind, index } for handle.device but received ${String(h.device)}`);
  }
  checkOneOf(h.device.kind, ['cuda', 'host'] as const, 'handle.device.kind');
}

function deviceOf(device: SharedAllocatorHandle['device']): Device {
  return device.kind === 'host' ? hostDevice : cudaDevice(device.index);
}
