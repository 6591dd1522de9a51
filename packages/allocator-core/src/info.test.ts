import { describe, expect, it } from 'vitest';
import { architectureNames, formatSystemInfo, kernelWarning, systemInfo } from './info.js';

describe('gpumem info: GPU architectures', () => {
  it("reads CMake's list: -real is machine code only, a bare number adds its PTX", () => {
    expect(architectureNames('80-real 86-real 89-real 90-real 100-real 120')).toEqual([
      'sm_80',
      'sm_86',
      'sm_89',
      'sm_90',
      'sm_100',
      'sm_120',
      'compute_120',
    ]);
    expect(architectureNames('90')).toEqual(['sm_90', 'compute_90']);
    expect(architectureNames('90-virtual')).toEqual(['compute_90']);
    expect(architectureNames('')).toEqual([]);
  });

  it('warns for a device the kernels were not built for, and for one that runs them from PTX', () => {
    expect(kernelWarning({ computeCapability: '9.0', kernels: { runnable: true, binaryVersion: 90, ptxVersion: 90 } })).toBeUndefined();
    expect(kernelWarning({ computeCapability: '8.6', kernels: { runnable: true, binaryVersion: 80, ptxVersion: 80 } })).toBeUndefined();
    const missing = kernelWarning({
      computeCapability: '7.5',
      kernels: { runnable: false, binaryVersion: 0, ptxVersion: 0, error: 'cudaErrorNoKernelImageForDevice: no kernel image is available' },
    });
    expect(missing).toMatch(/not built for sm_75/);
    expect(missing).toMatch(/GPUMEM_CUDA_ARCH=native/);
    expect(missing).toMatch(/cudaErrorNoKernelImageForDevice/);
    expect(kernelWarning({ computeCapability: '13.0', kernels: { runnable: true, binaryVersion: 130, ptxVersion: 120 } })).toMatch(
      /compute_120 PTX/,
    );
  });

  it('systemInfo states the built architectures (none without CUDA) and each device its kernel image', () => {
    const info = systemInfo();
    expect(info.cudaArchitectures.length > 0).toBe(info.builtWithCuda);
    for (const d of info.devices) expect(typeof d.kernels.runnable).toBe('boolean');
    if (info.builtWithCuda) expect(formatSystemInfo(info)).toMatch(/kernels built for: sm_/);
  });

  it('lists the strategies that sleep and wake by tag (the registry flag sleep)', () => {
    const info = systemInfo();
    const sleeping = info.strategies.filter((s) => s.sleep).map((s) => s.name);
    expect(formatSystemInfo(info)).toContain(`  sleep and wake by tag: ${sleeping.length > 0 ? sleeping.join(', ') : 'none'}\n`);
    const strategy = (name: string, sleep: boolean) => ({
      name,
      description: name,
      requiresCuda: false,
      nativeLayers: true,
      capturable: false,
      hostMemory: false,
      requiresOptions: false,
      managedMemory: false,
      spillsToHost: false,
      peerAccess: false,
      sleep,
      addressOnly: false,
      available: true,
    });
    const two = { ...info, strategies: [strategy('pool', false), strategy('expandable', true), strategy('tiered', true)] };
    expect(formatSystemInfo(two)).toContain('strategies:\n  pool        available    pool\n');
    expect(formatSystemInfo(two)).toContain('\n  sleep and wake by tag: expandable, tiered\n');
  });
});
