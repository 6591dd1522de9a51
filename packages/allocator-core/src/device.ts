/**
 * Devices: the GPUs the addon sees, and the host.
 * @module
 */
import { InvalidStateError, nativeCall } from './errors.js';
import { loadNative, type NativeDeviceProperties, type NativeTools } from './native.js';

/** Where an allocator's memory lives. */
export interface Device {
  readonly kind: 'cuda' | 'host';
  /** CUDA device ordinal; -1 for the host. */
  readonly index: number;
  /** e.g. 'cuda:0' or 'host'. */
  readonly id: string;
}

/** Properties of a CUDA device. */
export type DeviceProperties = NativeDeviceProperties;

/** The host, for strategies over host memory. */
export const hostDevice: Device = Object.freeze({ kind: 'host', index: -1, id: 'host' });

const cudaDevices = new Map<number, Device>();

/** Number of CUDA devices; 0 when there is no driver, no device, or the build has no CUDA. */
export function deviceCount(): number {
  return loadNative().deviceCount();
}

/**
 * Why there is no CUDA device, in plain words (empty when there is one): no CUDA support in this
 * build, no CUDA driver on this machine, a driver too old for the build's CUDA runtime, or a driver
 * but no visible device; the runtime's own message follows in parentheses.
 */
export function deviceStatus(): string {
  const native = loadNative();
  if (native.deviceCount() > 0) return '';
  return explainNoDevice(native.builtWithCuda, native.driverVersion, native.deviceStatus(), native.runtimeVersion);
}

/**
 * The oldest Linux driver of each CUDA major release (CUDA's release notes, "CUDA Toolkit and
 * Minimum Required Driver Version"): a driver older than this makes cudaGetDeviceCount fail with
 * cudaErrorInsufficientDriver.
 */
const minimumDriver: Readonly<Record<number, number>> = { 12: 525, 13: 580 };

/** `13000` as `13.0`. */
const cudaVersion = (code: number) => `${Math.floor(code / 1000)}.${Math.floor((code % 1000) / 10)}`;

/**
 * The driver requirement a too-old driver misses, e.g. "the NVIDIA driver is older than CUDA 13
 * needs (580 or later); it supports CUDA 12.4". `runtimeVersion` and `driverVersion` are CUDA
 * version codes (13000 is 13.0); 0 when unknown.
 */
function driverRequirement(runtimeVersion: number, driverVersion: number): string {
  const major = Math.floor(runtimeVersion / 1000);
  const needs = minimumDriver[major] === undefined ? '' : ` (${minimumDriver[major]} or later)`;
  const cuda = major > 0 ? `CUDA ${major}` : "this build's CUDA runtime";
  const supports = driverVersion > 0 ? `; it supports CUDA ${cudaVersion(driverVersion)}` : '';
  return `the NVIDIA driver is older than ${cuda} needs${needs}${supports}`;
}

/**
 * The plain-words reason behind a device count of 0 (see {@link deviceStatus}); exported for tests.
 * `runtimeVersion` is the build's CUDA runtime (the addon's `runtimeVersion`; 13000 is 13.0).
 */
export function explainNoDevice(builtWithCuda: boolean, driverVersion: number, runtimeMessage: string, runtimeVersion = 0): string {
  const detail = runtimeMessage ? ` (${runtimeMessage})` : '';
  if (!builtWithCuda) return 'no CUDA device: this build of gpumem has no CUDA support (no CUDA toolkit when it was built)';
  if (!driverVersion) return `no CUDA driver on this machine, so no CUDA device${detail}`;
  if (
    /cudaErrorInsufficientDriver/.test(runtimeMessage) ||
    (runtimeVersion > 0 && Math.floor(driverVersion / 1000) < Math.floor(runtimeVersion / 1000))
  ) {
    return `no CUDA device: ${driverRequirement(runtimeVersion, driverVersion)} (cudaErrorInsufficientDriver)`;
  }
  return `no CUDA device: the CUDA driver is installed but no device is visible (check CUDA_VISIBLE_DEVICES)${detail}`;
}

/** True when at least one CUDA device can be used. */
export function hasCudaDevice(): boolean {
  return deviceCount() > 0;
}

/** The CUDA device `index`; throws RangeError when it does not exist. */
export function cudaDevice(index = 0): Device {
  if (!Number.isInteger(index) || index < 0) {
    throw new RangeError(`Expected non-negative integer for device but received ${String(index)}`);
  }
  const count = deviceCount();
  if (count === 0) throw new InvalidStateError(`cuda:${index} is not available: ${deviceStatus()}`);
  if (index >= count) throw new RangeError(`Expected a CUDA device index below ${count} for device but received ${index}`);
  let device = cudaDevices.get(index);
  if (!device) {
    device = Object.freeze({ kind: 'cuda', index, id: `cuda:${index}` }) as Device;
    cudaDevices.set(index, device);
  }
  return device;
}

/** Properties of CUDA device `index`. */
export function deviceProperties(index = 0): DeviceProperties {
  cudaDevice(index);
  return nativeCall('deviceProperties', () => loadNative().deviceProperties(index));
}

/** Free and total memory of CUDA device `index`, from cudaMemGetInfo. */
export function memoryInfo(index = 0): { freeBytes: number; totalBytes: number } {
  cudaDevice(index);
  return nativeCall('memoryInfo', () => loadNative().memoryInfo(index));
}

/**
 * The addon's host-stream queues, or undefined without the addon: work can only be queued on a host
 * stream through it, so then there is nothing to run.
 */
export function hostQueues(): NativeTools | undefined {
  try {
    return loadNative().tools;
  } catch {
    return undefined;
  }
}

/** Waits for all work on the device; for the host, runs the work queued on host streams (if any). */
export function synchronizeDevice(device: Device): void {
  if (device.kind === 'cuda') nativeCall('synchronizeDevice', () => loadNative().synchronizeDevice(device.index));
  else hostQueues()?.synchronizeHostStreams();
}
