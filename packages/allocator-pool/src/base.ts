/**
 * The 'pool' strategy: a caching block pool (native) over cudaMalloc, or over host memory where
 * there is no GPU. Sizes round to 512 B; small requests share 2 MiB segments, large ones get
 * segments rounded to 2 MiB; best fit with splitting and coalescing; per-stream free lists with
 * events for cross-stream reuse and recordStream; on out-of-memory it releases cached segments and
 * retries once. Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkBytes,
  checkNonNegative,
  checkOneOf,
  checkOptionKeys,
  cudaDevice,
  hasCudaDevice,
  hostDevice,
  NativeAllocator,
  type NativeLayerOptions,
} from '@gpumem/allocator-core';

export type PoolUpstream = 'cuda' | 'host' | 'auto';

export interface PoolAllocatorOptions extends NativeLayerOptions {
  /** Where segments come from: 'cuda' (cudaMalloc), 'host', or 'auto' (cuda when a GPU is present; the default). */
  upstream?: PoolUpstream;
  /** CUDA device ordinal for the 'cuda' upstream (default 0). */
  device?: number;
  /** Cap on reserved bytes (default: none beyond the device's own memory). */
  maxReservedBytes?: number;
  /** Requests up to this size are small and share segments (default 1 MiB). */
  smallRequestLimit?: number;
  /** Size of the segments small requests share (default 2 MiB). */
  smallSegmentBytes?: number;
  /** Large segments are rounded up to a multiple of this (default 2 MiB). */
  largeSegmentRounding?: number;
}

const optionKeys = [
  'upstream',
  'device',
  'maxReservedBytes',
  'smallRequestLimit',
  'smallSegmentBytes',
  'largeSegmentRounding',
  'limitBytes',
  'trackingCapacity',
  'faultInjection',
];
const upstreams: readonly PoolUpstream[] = ['cuda', 'host', 'auto'];

export class PoolAllocator extends NativeAllocator {
  /** The upstream actually used ('auto' resolved). */
  readonly upstream: 'cuda' | 'host';

  constructor(options: PoolAllocatorOptions = {}) {
    checkOptionKeys(options, optionKeys, 'pool');
    const requested = options.upstream ?? 'auto';
    checkOneOf(requested, upstreams, 'upstream');
    const upstream = requested === 'auto' ? (hasCudaDevice() ? 'cuda' : 'host') : requested;
    const index = options.device ?? 0;
    checkNonNegative(index, 'device');
    for (const key of ['maxReservedBytes', 'smallRequestLimit', 'smallSegmentBytes', 'largeSegmentRounding'] as const) {
      if (options[key] !== undefined) checkBytes(options[key], key);
    }
    const device = upstream === 'cuda' ? cudaDevice(index) : hostDevice;
    super('pool', device, {
      strategy: 'pool',
      device: index,
      options: {
        upstream,
        ...(options.maxReservedBytes !== undefined && { maxReservedBytes: options.maxReservedBytes }),
        ...(options.smallRequestLimit !== undefined && { smallRequestLimit: options.smallRequestLimit }),
        ...(options.smallSegmentBytes !== undefined && { smallSegmentBytes: options.smallSegmentBytes }),
        ...(options.largeSegmentRounding !== undefined && { largeSegmentRounding: options.largeSegmentRounding }),
      },
    }, options);
    this.upstream = upstream;
  }
}
