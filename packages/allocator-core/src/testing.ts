/**
 * GPU kernels for tests and benchmarks of native allocators: fill memory with a value, and add up
 * u32 values (optionally after spinning on the GPU for a while, to keep a stream busy). Pointers
 * are checked against the allocator's live allocations before any launch.
 * @module
 */
import { NativeAllocator, nativeResourceOf } from './native-allocator.js';
import type { Stream } from './stream.js';
import type { DevicePtr } from './types.js';
import { translateNativeError } from './errors.js';
import { checkNonNegative, checkPointer } from './validate.js';

function native(allocator: NativeAllocator) {
  if (!(allocator instanceof NativeAllocator)) throw new TypeError('Expected a native allocator for allocator');
  return nativeResourceOf(allocator);
}

/** Fills `count` u32 values at `ptr` with `value`, on `stream`. */
export function fillU32(allocator: NativeAllocator, ptr: DevicePtr, count: number, value: number, stream?: Stream): void {
  checkPointer(ptr);
  checkNonNegative(count, 'count');
  checkNonNegative(value, 'value');
  try {
    native(allocator).fillU32(ptr, count, value >>> 0, stream?.handle ?? 0);
  } catch (e) {
    throw translateNativeError(e, allocator.name);
  }
}

/**
 * Adds the sum of `count` u32 values at `ptr` into the u64 at `outPtr`, on `stream`, after
 * spinning `spinNs` nanoseconds on the GPU.
 */
export function sumU32(
  allocator: NativeAllocator,
  ptr: DevicePtr,
  count: number,
  outPtr: DevicePtr,
  stream?: Stream,
  spinNs = 0,
): void {
  checkPointer(ptr);
  checkPointer(outPtr, 'outPtr');
  checkNonNegative(count, 'count');
  checkNonNegative(spinNs, 'spinNs');
  try {
    native(allocator).sumU32(ptr, count, outPtr, stream?.handle ?? 0, spinNs);
  } catch (e) {
    throw translateNativeError(e, allocator.name);
  }
}
