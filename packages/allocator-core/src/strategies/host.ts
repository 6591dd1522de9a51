/**
 * 'host': plain host memory, 256-byte aligned. A real strategy, so the framework, the pool's
 * logic and the trainer's CPU path run on machines with no GPU.
 * @module
 */
import { hostDevice } from '../device.js';
import { NativeAllocator, type NativeLayerOptions } from '../native-allocator.js';
import { checkOptionKeys } from '../validate.js';

export type HostAllocatorOptions = NativeLayerOptions;

export class HostAllocator extends NativeAllocator {
  constructor(options: HostAllocatorOptions = {}) {
    checkOptionKeys(options, ['limitBytes', 'trackingCapacity', 'faultInjection'], 'host');
    super('host', hostDevice, { strategy: 'host' }, options);
  }
}
