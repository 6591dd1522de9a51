/**
 * 'host': plain host memory, 256-byte aligned. A real strategy, so the framework, the pool's
 * logic and the trainer's CPU path run on machines with no GPU.
 * @module
 */
import { hostDevice } from '../device.js';
import { NativeAllocator, nativeLayerOptions } from '../native-allocator.js';
import { defineOptions, type OptionsOf } from '../options.js';

const hostOptions = defineOptions('host', nativeLayerOptions);

/** The 'host' strategy's options (from its options definition). */
export interface HostAllocatorOptions extends OptionsOf<typeof hostOptions> {}

/** Checks 'host' options as its constructor does, making nothing (its registration's checkOptions). */
export function checkHostOptions(options: object): void {
  hostOptions.parse(options);
}

export class HostAllocator extends NativeAllocator {
  constructor(options: HostAllocatorOptions = {}) {
    hostOptions.parse(options);
    super('host', hostDevice, { strategy: 'host' }, options);
  }
}
