/**
 * A {@link Communicator} over one of the addon's communicators (NCCL or the shared-memory one):
 * checks every argument in JavaScript first (RangeError / TypeError, nothing sent), makes sure the
 * stream belongs to the communicator's device, turns native failures into typed errors, and throws
 * InvalidStateError after dispose().
 * @module
 */
import { checkBytes, checkPointer, InvalidStateError, Stream, type Device, type DevicePtr } from '@gpumem/allocator-core';
import type { NativeComm } from './comm-native.js';
import { commCall } from './comm-errors.js';
import type { CommBackend, Communicator } from './communicator.js';

const f32 = 4;

export class NativeCommunicator implements Communicator {
  #native: NativeComm | undefined;

  constructor(
    native: NativeComm,
    readonly backend: CommBackend,
    readonly rank: number,
    readonly size: number,
    readonly capturable: boolean,
    /** Where the buffers live; streams must belong to it. */
    readonly device: Device,
  ) {
    this.#native = native;
  }

  allReduce(buffer: DevicePtr, count: number, stream: Stream): void {
    const native = this.#live('allReduce');
    checkPointer(buffer, 'buffer');
    this.#checkExtent(buffer, count, 1, 'buffer');
    const handle = this.#streamHandle(stream);
    commCall('allReduce', () => native.allReduce(buffer, count, handle));
  }

  allGather(send: DevicePtr, recv: DevicePtr, count: number, stream: Stream): void {
    const native = this.#live('allGather');
    checkPointer(send, 'send');
    checkPointer(recv, 'recv');
    this.#checkExtent(send, count, 1, 'send');
    this.#checkExtent(recv, count, this.size, 'recv');
    const handle = this.#streamHandle(stream);
    commCall('allGather', () => native.allGather(send, recv, count, handle));
  }

  broadcast(buffer: DevicePtr, count: number, root: number, stream: Stream): void {
    const native = this.#live('broadcast');
    checkPointer(buffer, 'buffer');
    this.#checkExtent(buffer, count, 1, 'buffer');
    if (typeof root !== 'number')
      throw new TypeError(`Expected an integer in [0, ${this.size - 1}] for root but received ${String(root)} of type ${typeof root}`);
    if (!Number.isInteger(root) || root < 0 || root >= this.size) {
      throw new RangeError(`Expected an integer in [0, ${this.size - 1}] for root but received ${root}`);
    }
    const handle = this.#streamHandle(stream);
    commCall('broadcast', () => native.broadcast(buffer, count, root, handle));
  }

  abort(reason: string): void {
    const native = this.#live('abort');
    if (typeof reason !== 'string')
      throw new TypeError(`Expected string for reason but received ${String(reason)} of type ${typeof reason}`);
    commCall('abort', () => native.abort(reason));
  }

  dispose(): void {
    const native = this.#native;
    this.#native = undefined;
    native?.destroy();
  }

  #live(what: string): NativeComm {
    if (!this.#native) throw new InvalidStateError(`${this.backend} communicator: ${what} after dispose()`);
    return this.#native;
  }

  /** count is a positive integer and `ptr` + count·per·4 bytes stays a safe integer. */
  #checkExtent(ptr: number, count: number, per: number, name: string): void {
    checkBytes(count, 'count');
    if (!Number.isSafeInteger(ptr + count * per * f32)) {
      throw new RangeError(
        `Expected ${name} + ${per > 1 ? 'size · ' : ''}count · 4 below 2^53 but received ${name} ${ptr} and count ${count}`,
      );
    }
  }

  #streamHandle(stream: Stream): number {
    if (!(stream instanceof Stream)) {
      throw new TypeError(
        `Expected a Stream for stream but received ${stream === null ? 'null' : typeof stream === 'object' ? 'an object that is not a Stream' : `${String(stream)} of type ${typeof stream}`}`,
      );
    }
    const d = stream.device;
    if (d.kind !== this.device.kind || d.index !== this.device.index) {
      throw new TypeError(`Expected a stream of ${this.device.id} for stream but received one of ${d.id}`);
    }
    return stream.handle;
  }
}
