/**
 * The trainer's runtime: one allocator, one stream, and the scopes that free intermediates. Every
 * tensor's storage comes from the allocator and goes back to it, on the runtime's stream, so the
 * allocator sees the model's real allocation pattern.
 * @module
 */
import { loadNative, Stream, type Allocator } from '@gpumem/allocator-core';
import type { NativeOps } from './native-ops.js';
import { Tensor, dtypeBytes, type DType } from './tensor.js';

/**
 * What the trainer is doing when it allocates: recorded with each allocation event (the tracking
 * layers' tag, the index into this list), so a trace says which phase asked for which memory.
 * The phases come first; then the roles of long-lived data that a placement may keep apart:
 * 'features' (a dataset's inputs and labels), 'graph' (the adjacency structure) and 'activations'
 * (what forward keeps for backward). The allocator hears the name too
 * ({@link Allocator.setPlacementTag}), so a strategy that places memory by tag can act on it.
 */
export const allocationTags = [
  'other',
  'setup',
  'forward',
  'loss',
  'backward',
  'optimizer',
  'validation',
  'features',
  'graph',
  'activations',
  'communication',
] as const;
export type AllocationTag = (typeof allocationTags)[number];

export class Runtime {
  /** True when tensors live on a GPU and ops run CUDA kernels; false for the CPU references. */
  readonly onDevice: boolean;
  readonly stream: Stream;
  readonly ops: NativeOps;
  /** The allocator's peak allocated bytes before the first epoch (data and graph set up), once one has begun. */
  setupPeakBytes: number | undefined;
  readonly #scopes: Tensor[][] = [];
  readonly #ownsStream: boolean;
  /** Live tensors made by this runtime (leak checks; dispose() frees what a failed run left). */
  readonly #live = new Set<Tensor>();
  #tagger: ((tag: number) => void) | undefined;
  #tag = 0;
  /** The workspaces this runtime bound, by stream: unbound and freed by dispose(). */
  readonly #workspaces = new Map<Stream, { scratch: number; scratchBytes: number; blas: number; blasBytes: number }>();

  constructor(
    readonly allocator: Allocator,
    stream?: Stream,
  ) {
    this.onDevice = allocator.device.kind === 'cuda';
    this.#ownsStream = stream === undefined;
    this.stream = stream ?? Stream.create(allocator.device);
    this.ops = (loadNative() as unknown as { ops: NativeOps }).ops;
    if (!this.ops) throw new Error('the gpumem addon was built without the trainer ops; rebuild it (npm run build:native)');
  }

  /** Sends each phase change (an index into {@link allocationTags}) to `tagger`, e.g. a tracker's setTag. */
  setTagger(tagger: ((tag: number) => void) | undefined): void {
    this.#tagger = tagger;
    this.#tag = 0;
    tagger?.(0);
    this.allocator.setPlacementTag?.('other');
  }

  /** Marks what the allocations from now on are for: tells the tagger (if set) and the allocator (if it places by tag). */
  tag(phase: AllocationTag): void {
    const id = allocationTags.indexOf(phase);
    if (id === this.#tag) return;
    this.#tag = id;
    this.#tagger?.(id);
    this.allocator.setPlacementTag?.(phase);
  }

  /** The current allocation tag. */
  get currentTag(): AllocationTag {
    return allocationTags[this.#tag] ?? 'other';
  }

  /** Runs fn with allocations tagged `phase`, then goes back to the tag before. */
  tagged<T>(phase: AllocationTag, fn: () => T): T {
    const previous = this.currentTag;
    this.tag(phase);
    try {
      return fn();
    } finally {
      this.tag(previous);
    }
  }

  /**
   * Gives `stream` the workspace the ops need on it (reduction scratch and cuBLAS's workspace,
   * sizes from ops.workspaceBytes), allocated from this runtime's allocator under the 'setup' tag,
   * so that the allocator counts every byte a run uses. Call it for every stream the run hands to
   * ops (the runtime's own and any side stream) before ops run there; once per stream, later calls
   * do nothing. dispose() unbinds and frees them all.
   */
  bindWorkspace(stream: Stream): void {
    if (this.#workspaces.has(stream)) return;
    const { scratchBytes, blasBytes } = this.ops.workspaceBytes(this.onDevice);
    const previous = this.currentTag;
    this.tag('setup');
    const scratch = scratchBytes > 0 ? this.allocator.malloc(scratchBytes, stream) : 0;
    let blas = 0;
    try {
      blas = blasBytes > 0 ? this.allocator.malloc(blasBytes, stream) : 0;
      this.ops.bindStreamWorkspace(this.onDevice, stream.handle, scratch, scratchBytes, blas, blasBytes);
    } catch (e) {
      if (blas !== 0) this.allocator.free(blas, blasBytes, stream);
      if (scratch !== 0) this.allocator.free(scratch, scratchBytes, stream);
      throw e;
    } finally {
      this.tag(previous);
    }
    this.#workspaces.set(stream, { scratch, scratchBytes, blas, blasBytes });
  }

  /** Native stream handle for ops. */
  get s(): number {
    return this.stream.handle;
  }

  /** Tensors made by this runtime and not yet disposed. */
  get liveTensors(): number {
    return this.#live.size;
  }

  /** A new tensor with uninitialised storage from the allocator; freed with its scope. */
  empty(shape: readonly number[], dtype: DType = 'f32'): Tensor {
    const size = shape.reduce((a, b) => a * b, 1);
    const bytes = Math.max(size * dtypeBytes[dtype], 1);
    const ptr = this.allocator.malloc(bytes, this.stream);
    const t: Tensor = new Tensor(this, ptr, shape, dtype, bytes, () => {
      this.allocator.free(ptr, bytes, this.stream);
      this.#live.delete(t);
    });
    this.#live.add(t);
    this.#scopes[this.#scopes.length - 1]?.push(t);
    return t;
  }

  zeros(shape: readonly number[], dtype: DType = 'f32'): Tensor {
    const t = this.empty(shape, dtype);
    if (dtype === 'f32') this.ops.fillF32(this.onDevice, this.s, t.ptr, t.size, 0);
    else if (dtype === 'i32') this.ops.fillI32(this.onDevice, this.s, t.ptr, t.size, 0);
    else this.ops.fillI32(this.onDevice, this.s, t.ptr, Math.ceil(t.bytes / 4), 0);
    return t;
  }

  /** A tensor holding `data` (copied in stream order). */
  fromArray(data: Float32Array | Int32Array | Uint8Array, shape: readonly number[]): Tensor {
    const dtype: DType = data instanceof Float32Array ? 'f32' : data instanceof Int32Array ? 'i32' : 'u8';
    const size = shape.reduce((a, b) => a * b, 1);
    if (size !== data.length) {
      throw new RangeError(`Expected ${size} elements for shape [${shape.join(', ')}] but received ${data.length}`);
    }
    const t = this.empty(shape, dtype);
    if (data.length > 0) this.allocator.write(t.ptr, data, 0, this.stream);
    return t;
  }

  /**
   * Runs fn in a scope: every tensor made inside and not returned (a Tensor, or an array or
   * object whose values are Tensors) nor kept is disposed when fn returns or throws.
   */
  scope<T>(fn: () => T): T {
    const made: Tensor[] = [];
    this.#scopes.push(made);
    let result: T;
    try {
      result = fn();
    } catch (e) {
      this.#scopes.pop();
      for (const t of made) t.dispose();
      throw e;
    }
    this.#scopes.pop();
    const escaping = new Set<Tensor>();
    collectTensors(result, escaping);
    const parent = this.#scopes[this.#scopes.length - 1];
    for (const t of made) {
      if (t.disposed) continue;
      if (escaping.has(t)) parent?.push(t);
      else t.dispose();
    }
    return result;
  }

  /**
   * Runs fn and returns every tensor it made that is still live, owned by the caller: for work
   * captured into a CUDA Graph, whose replays reuse those exact addresses.
   */
  collect(fn: () => void): Tensor[] {
    const made: Tensor[] = [];
    this.#scopes.push(made);
    try {
      fn();
    } catch (e) {
      for (const t of made) t.dispose();
      throw e;
    } finally {
      this.#scopes.pop();
    }
    return made.filter((t) => !t.disposed);
  }

  /** Moves t out of the current scope: the caller disposes it. */
  keep<T extends Tensor>(t: T): T {
    const scope = this.#scopes[this.#scopes.length - 1];
    if (scope) {
      const i = scope.indexOf(t);
      if (i >= 0) scope.splice(i, 1);
    }
    return t;
  }

  /**
   * Moves `t`'s memory towards `to` in stream order (trainer-inserted prefetch): the allocator's
   * prefetch, so it does something only where the strategy can move memory (uvm, tiered) and
   * returns false elsewhere. A view (a layer's weight inside its ParameterSet, rows of a batch) is
   * no allocation of its own, and strategies prefetch allocations (uvm and pool reject any other
   * pointer): it is prefetched as the range of the allocation it lies in from that allocation's
   * start to the view's end, as the pool does for its blocks (a prefetch is a hint, so moving the
   * pages before the view too is allowed).
   */
  prefetch(t: Tensor, to: 'device' | 'host'): boolean {
    if (this.#live.has(t)) return this.allocator.prefetch(t.ptr, t.bytes, to, this.stream);
    for (const base of this.#live) {
      if (t.ptr >= base.ptr && t.ptr + t.bytes <= base.ptr + base.bytes) {
        return this.allocator.prefetch(base.ptr, t.ptr - base.ptr + t.bytes, to, this.stream);
      }
    }
    return this.allocator.prefetch(t.ptr, t.bytes, to, this.stream);
  }

  /** {@link prefetch} of each tensor to the device: a layer's operands before it runs. */
  prefetchToDevice(...tensors: Tensor[]): void {
    for (const t of tensors) this.prefetch(t, 'device');
  }

  synchronize(): void {
    this.stream.synchronize();
  }

  /**
   * Waits for the stream, frees every tensor still live and every stream workspace (see
   * bindWorkspace), and destroys the stream if the runtime made it. A run that ends normally has disposed its tensors already; one cut short by an error
   * (an OutOfMemoryError half-way through building a model, say) gives the rest back here, so the
   * allocator is left as it was found. Anything that still uses those tensors (a CUDA Graph) must
   * be destroyed first.
   */
  dispose(): void {
    this.stream.synchronize();
    for (const t of [...this.#live]) t.dispose();
    // After the streams' work is done: unbound first, so no op can use the memory once it is freed.
    for (const [stream, w] of this.#workspaces) {
      stream.synchronize();
      this.ops.unbindStreamWorkspace(this.onDevice, stream.handle);
      if (w.blas !== 0) this.allocator.free(w.blas, w.blasBytes, stream);
      if (w.scratch !== 0) this.allocator.free(w.scratch, w.scratchBytes, stream);
    }
    this.#workspaces.clear();
    if (this.#ownsStream) this.stream.destroy();
  }
}

function collectTensors(value: unknown, out: Set<Tensor>): void {
  if (value instanceof Tensor) out.add(value);
  else if (Array.isArray(value)) for (const v of value) collectTensors(v, out);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) collectTensors(v, out);
}
