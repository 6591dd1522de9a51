/**
 * The 'uvm' strategy: cudaMallocManaged, prefetched to the device on allocation (on by default),
 * with cudaMemAdvise hints. Managed memory may exceed the device's memory (oversubscription):
 * nothing here stops a user from asking for more, and pages then migrate on demand.
 * Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkNonNegative,
  checkPeerAccess,
  cudaDevice,
  defineOptions,
  formatBytes,
  NativeAllocator,
  nativeLayerOptions,
  option,
  peerAccessOption,
  peerAccessSpec,
  type DevicePtr,
  type OptionsOf,
  type Stream,
} from '@gpumem/allocator-core';

/** Default size from which allocations are logged. */
export const defaultLogThresholdBytes = 2 ** 30;

/** A cudaMemAdvise target. */
export type AdviseTarget = 'device' | 'host' | 'none';

const adviseTargets: readonly AdviseTarget[] = ['device', 'host', 'none'];

function checkLogThreshold(value: unknown, name: string): number | false {
  if (value !== false) checkNonNegative(value, name);
  return value;
}

function checkLogger(value: unknown): (line: string) => void {
  if (typeof value !== 'function') throw new TypeError(`Expected a function for logger but received ${typeof value}`);
  return value as (line: string) => void;
}

const uvmOptions = defineOptions('uvm', {
  /** CUDA device ordinal (default 0). */
  device: option.nonNegative({ default: 0 }),
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory. Managed memory is
   * reachable from every device already, so nothing more is done; the list is checked as for the
   * other strategies (another device, with a P2P path to `device`), so that one option works with
   * every GPU strategy. Default: none.
   */
  peerAccess: peerAccessOption,
  /** Prefetch every allocation to the device on the allocating stream (default true). */
  prefetchOnAllocate: option.boolean({ default: true }),
  /** cudaMemAdviseSetPreferredLocation for every allocation (default 'none'). */
  preferredLocation: option.oneOf(adviseTargets, { default: 'none' }),
  /** cudaMemAdviseSetAccessedBy for every allocation (default 'none'). */
  accessedBy: option.oneOf(adviseTargets, { default: 'none' }),
  /** cudaMemAdviseSetReadMostly for every allocation (default false). */
  readMostly: option.boolean({ default: false }),
  /** Log allocations of at least this many bytes (default 1 GiB); false turns the log off. */
  logThresholdBytes: option.custom(checkLogThreshold, { default: defaultLogThresholdBytes }),
  /** Where log lines go (default: standard error). */
  logger: option.custom(checkLogger),
  ...nativeLayerOptions,
});

/** The 'uvm' strategy's options (from its options definition). */
export interface UvmAllocatorOptions extends OptionsOf<typeof uvmOptions> {}

export class UvmAllocator extends NativeAllocator {
  /** Allocations of at least this size are logged; Infinity when the log is off. */
  readonly logThresholdBytes: number;
  readonly prefetchOnAllocate: boolean;
  readonly #logger: (line: string) => void;

  constructor(options: UvmAllocatorOptions = {}) {
    const parsed = uvmOptions.parse(options);
    const { device: index, prefetchOnAllocate: prefetch, preferredLocation, accessedBy, readMostly } = parsed;
    const threshold = parsed.logThresholdBytes;
    const device = cudaDevice(index);
    const peers = checkPeerAccess(parsed.peerAccess, device);
    super(
      'uvm',
      device,
      {
        strategy: 'uvm',
        device: index,
        ...peerAccessSpec(peers),
        options: { prefetchOnAllocate: prefetch, preferredLocation, accessedBy, readMostly },
      },
      options,
    );
    this.prefetchOnAllocate = prefetch;
    this.logThresholdBytes = threshold === false ? Infinity : threshold;
    this.#logger = parsed.logger ?? ((line) => process.stderr.write(`${line}\n`));
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
