/**
 * Device tensors: a shape, a dtype and storage from the runtime's allocator.
 * @module
 */
import type { DevicePtr } from '@gpumem/allocator-core';
import type { Runtime } from './runtime.js';

/** Element types; 'bf16' holds the upper 16 bits of an f32 (read back as a Uint16Array of those bits). */
export type DType = 'f32' | 'i32' | 'u8' | 'bf16';
export const dtypeBytes: Record<DType, number> = { f32: 4, i32: 4, u8: 1, bf16: 2 };

export class Tensor {
  readonly size: number;
  #release: (() => void) | undefined;

  constructor(
    readonly runtime: Runtime,
    readonly ptr: DevicePtr,
    readonly shape: readonly number[],
    readonly dtype: DType,
    /** Bytes allocated for the storage (at least 1). */
    readonly bytes: number,
    release: (() => void) | undefined,
  ) {
    this.size = shape.reduce((a, b) => a * b, 1);
    this.#release = release;
  }

  #wasDisposed = false;
  #viewOf: Tensor | undefined;

  get disposed(): boolean {
    return this.#wasDisposed;
  }

  /** Rows [start, start + count) of a tensor whose first dimension is rows: a view, no copy, not owned. */
  rows(start: number, count: number): Tensor {
    const rowSize = this.size / (this.shape[0] ?? 1);
    if (start < 0 || count < 0 || start + count > (this.shape[0] ?? 0)) {
      throw new RangeError(`rows(${start}, ${count}) is outside a tensor of ${this.shape[0]} rows`);
    }
    return this.view(start * rowSize, [count, ...this.shape.slice(1)]);
  }

  /** `shape`'s worth of elements from element `offset` on: a view, no copy, not owned. */
  view(offset: number, shape: readonly number[]): Tensor {
    const size = shape.reduce((a, b) => a * b, 1);
    if (offset < 0 || offset + size > this.size) {
      throw new RangeError(`a view of ${size} elements at ${offset} is outside a tensor of ${this.size}`);
    }
    const elementBytes = dtypeBytes[this.dtype];
    const view = new Tensor(this.runtime, this.ptr + offset * elementBytes, shape, this.dtype, Math.max(size * elementBytes, 1), undefined);
    view.#viewOf = this.#viewOf ?? this;
    return view;
  }

  /** The allocation this tensor's storage lies in, and the tensor's byte offset inside it. */
  #storage(): { ptr: DevicePtr; offset: number } {
    const base = this.#viewOf ?? this;
    return { ptr: base.ptr, offset: this.ptr - base.ptr };
  }

  /** Copies the values to the host (waits for the stream). */
  toArray(): Float32Array | Int32Array | Uint8Array | Uint16Array {
    const out =
      this.dtype === 'f32'
        ? new Float32Array(this.size)
        : this.dtype === 'i32'
          ? new Int32Array(this.size)
          : this.dtype === 'bf16'
            ? new Uint16Array(this.size)
            : new Uint8Array(this.size);
    if (this.size === 0) return out;
    const { ptr, offset } = this.#storage();
    this.runtime.allocator.read(ptr, out, offset, this.runtime.stream);
    return out;
  }

  /** Copies `data` into the tensor from element `at` on, in stream order. */
  write(data: Float32Array | Int32Array | Uint8Array, at = 0): void {
    if (at < 0 || at + data.length > this.size) {
      throw new RangeError(`writing ${data.length} elements at ${at} overruns a tensor of ${this.size}`);
    }
    const { ptr, offset } = this.#storage();
    this.runtime.allocator.write(ptr, data, offset + at * dtypeBytes[this.dtype], this.runtime.stream);
  }

  /** The f32 values as a Float32Array. */
  toFloat32(): Float32Array {
    if (this.dtype !== 'f32') throw new TypeError(`Expected an f32 tensor but this one is ${this.dtype}`);
    return this.toArray() as Float32Array;
  }

  /** Frees the storage (views free nothing). Idempotent. */
  dispose(): void {
    if (this.#wasDisposed) return;
    this.#wasDisposed = true;
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }
}
