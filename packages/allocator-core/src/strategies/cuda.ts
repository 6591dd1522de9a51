/**
 * 'cuda': plain cudaMalloc / cudaFree, the baseline. Every call goes to the driver, and cudaFree
 * synchronises the device, so recordStream has nothing to do.
 * @module
 */
import { cudaDevice } from '../device.js';
import { NativeAllocator, type NativeLayerOptions } from '../native-allocator.js';
import { checkNonNegative, checkOptionKeys } from '../validate.js';

export interface CudaAllocatorOptions extends NativeLayerOptions {
  /** CUDA device ordinal (default 0). */
  device?: number;
}

export class CudaAllocator extends NativeAllocator {
  constructor(options: CudaAllocatorOptions = {}) {
    checkOptionKeys(options, ['device', 'limitBytes', 'trackingCapacity', 'faultInjection'], 'cuda');
    const index = options.device ?? 0;
    checkNonNegative(index, 'device');
    const device = cudaDevice(index);
    super('cuda', device, { strategy: 'cuda', device: index }, options);
  }
}
