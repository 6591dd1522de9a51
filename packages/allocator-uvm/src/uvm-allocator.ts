/**
 * The 'uvm' strategy: cudaMallocManaged, prefetched to the device on allocation (on by default),
 * with cudaMemAdvise hints. Managed memory may exceed the device's memory (oversubscription):
 * nothing here stops a user from asking for more, and pages then migrate on demand.
 * Its native options and registry entry come from the native descriptor (./options.generated.ts);
 * the log (logThresholdBytes, logger) is TypeScript's own. Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkNonNegative,
  defineNativeStrategy,
  formatBytes,
  NativeStrategyAllocator,
  option,
  type DevicePtr,
  type OptionsOf,
  type Stream,
} from '@gpumem/allocator-core';
import { uvmDescriptor } from './options.generated.js';

/** Default size from which allocations are logged. */
export const defaultLogThresholdBytes = 2 ** 30;

/** A cudaMemAdvise target. */
export type AdviseTarget = 'device' | 'host' | 'none';

function checkLogThreshold(value: unknown, name: string): number | false {
  if (value !== false) checkNonNegative(value, name);
  return value;
}

function checkLogger(value: unknown): (line: string) => void {
  if (typeof value !== 'function') throw new TypeError(`Expected a function for logger but received ${typeof value}`);
  return value as (line: string) => void;
}

export const uvmStrategy = defineNativeStrategy(uvmDescriptor, {
  /** Log allocations of at least this many bytes (default 1 GiB); false turns the log off. */
  logThresholdBytes: option.custom(checkLogThreshold, { default: defaultLogThresholdBytes }),
  /** Where log lines go (default: standard error). */
  logger: option.custom(checkLogger),
});

/** The 'uvm' strategy's options (from its native descriptor, and the log's). */
export interface UvmAllocatorOptions extends OptionsOf<typeof uvmStrategy.options> {}

export class UvmAllocator extends NativeStrategyAllocator<typeof uvmStrategy> {
  /** Allocations of at least this size are logged; Infinity when the log is off. */
  readonly logThresholdBytes: number = this.parsed.logThresholdBytes === false ? Infinity : this.parsed.logThresholdBytes;
  readonly prefetchOnAllocate: boolean = this.parsed.prefetchOnAllocate;
  readonly #logger: (line: string) => void = this.parsed.logger ?? ((line) => process.stderr.write(`${line}\n`));

  constructor(options: UvmAllocatorOptions = {}) {
    super(uvmStrategy, options);
  }

  protected override doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
    const ptr = super.doMalloc(bytes, stream);
    if (bytes >= this.logThresholdBytes) {
      this.#logger(
        `gpumem uvm: allocated ${formatBytes(bytes)} of managed memory at 0x${ptr.toString(16)} ` +
          `on ${this.device.id} (prefetch on allocate: ${this.prefetchOnAllocate ? 'on' : 'off'})`,
      );
    }
    return ptr;
  }
}
