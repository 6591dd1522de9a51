/**
 * The 'uvm' strategy: cudaMallocManaged, prefetched to the device on allocation (on by default),
 * with cudaMemAdvise hints. Managed memory may exceed the device's memory (oversubscription):
 * nothing here stops a user from asking for more, and pages then migrate on demand.
 * Side-effect free; index.ts registers it.
 * @module
 */
import {
  checkBoolean,
  checkNonNegative,
  checkOneOf,
  checkOptionKeys,
  checkPeerAccess,
  cudaDevice,
  formatBytes,
  NativeAllocator,
  peerAccessSpec,
  type DevicePtr,
  type NativeLayerOptions,
  type Stream,
} from '@gpumem/allocator-core';

export type AdviseTarget = 'device' | 'host' | 'none';

export interface UvmAllocatorOptions extends NativeLayerOptions {
  /** CUDA device ordinal (default 0). */
  device?: number;
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory. Managed memory is
   * reachable from every device already, so nothing more is done; the list is checked as for the
   * other strategies (another device, with a P2P path to `device`), so that one option works with
   * every GPU strategy. Default: none.
   */
  peerAccess?: number[];
  /** Prefetch every allocation to the device on the allocating stream (default true). */
  prefetchOnAllocate?: boolean;
  /** cudaMemAdviseSetPreferredLocation for every allocation (default 'none'). */
  preferredLocation?: AdviseTarget;
  /** cudaMemAdviseSetAccessedBy for every allocation (default 'none'). */
  accessedBy?: AdviseTarget;
  /** cudaMemAdviseSetReadMostly for every allocation (default false). */
  readMostly?: boolean;
  /** Log allocations of at least this many bytes (default 1 GiB); false turns the log off. */
  logThresholdBytes?: number | false;
  /** Where log lines go (default: standard error). */
  logger?: (line: string) => void;
}

const optionKeys = [
  'device',
  'peerAccess',
  'prefetchOnAllocate',
  'preferredLocation',
  'accessedBy',
  'readMostly',
  'logThresholdBytes',
  'logger',
  'limitBytes',
  'trackingCapacity',
  'faultInjection',
];
const adviseTargets: readonly AdviseTarget[] = ['device', 'host', 'none'];

/** Default size from which allocations are logged. */
export const defaultLogThresholdBytes = 2 ** 30;

export class UvmAllocator extends NativeAllocator {
  /** Allocations of at least this size are logged; Infinity when the log is off. */
  readonly logThresholdBytes: number;
  readonly prefetchOnAllocate: boolean;
  readonly #logger: (line: string) => void;

  constructor(options: UvmAllocatorOptions = {}) {
    checkOptionKeys(options, optionKeys, 'uvm');
    const index = options.device ?? 0;
    checkNonNegative(index, 'device');
    const prefetch = options.prefetchOnAllocate ?? true;
    checkBoolean(prefetch, 'prefetchOnAllocate');
    const preferredLocation = options.preferredLocation ?? 'none';
    const accessedBy = options.accessedBy ?? 'none';
    checkOneOf(preferredLocation, adviseTargets, 'preferredLocation');
    checkOneOf(accessedBy, adviseTargets, 'accessedBy');
    const readMostly = options.readMostly ?? false;
    checkBoolean(readMostly, 'readMostly');
    const threshold = options.logThresholdBytes ?? defaultLogThresholdBytes;
    if (threshold !== false) checkNonNegative(threshold, 'logThresholdBytes');
    if (options.logger !== undefined && typeof options.logger !== 'function') {
      throw new TypeError(`Expected a function for logger but received ${typeof options.logger}`);
    }
    const device = cudaDevice(index);
    const peers = checkPeerAccess(options.peerAccess, device);
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
    this.#logger = options.logger ?? ((line) => process.stderr.write(`${line}\n`));
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
