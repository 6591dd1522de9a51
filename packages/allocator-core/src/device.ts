/**
 * Devices: the GPUs the addon sees, and the host.
 * @module
 */
import { loadNative, type NativeDeviceProperties } from './native.js';

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

/** Why there is no CUDA device (empty when there is one), e.g. 'CUDA driver version is insufficient …'. */
export function deviceStatus(): string {
  return loadNative().deviceStatus();
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
  if (index >= count) {
    const why = count === 0 ? ` (${deviceStatus()})` : '';
    throw new RangeError(`Expected a CUDA device index below ${count} for device but received ${index}${why}`);
  }
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
  return loadNative().deviceProperties(index);
}

/** Free and total memory of CUDA device `index`, from cudaMemGetInfo. */
export function memoryInfo(index = 0): { freeBytes: number; totalBytes: number } {
  cudaDevice(index);
  return loadNative().memoryInfo(index);
}

/** Waits for all work on the device. A no-op for the host. */
export function synchronizeDevice(device: Device): void {
  if (device.kind === 'cuda') loadNative().synchronizeDevice(device.index);
}
