/**
 * Whether GPU tests run here, and why not. `npm run test:gpu` sets GPUMEM_REQUIRE_GPU=1: then a
 * missing device fails the run instead of skipping.
 */
import { deviceStatus, hasCudaDevice } from '@gpumem/allocator-core';

export const gpuAvailable = hasCudaDevice();
export const noGpuReason = gpuAvailable ? '' : deviceStatus();

if (!gpuAvailable && process.env.GPUMEM_REQUIRE_GPU === '1') {
  throw new Error(`GPUMEM_REQUIRE_GPU=1 but ${noGpuReason}`);
}

/** A suite title that says why it is skipped, so a skip is never silent. */
export function gpuTitle(title: string): string {
  return gpuAvailable ? title : `${title} [skipped: ${noGpuReason}]`;
}
