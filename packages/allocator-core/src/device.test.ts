import { describe, expect, it } from 'vitest';
import { CudaError, cudaDevice, explainNoDevice, hasCudaDevice, hostDevice, InvalidStateError, Stream } from './index.js';
import { nativeCall } from './errors.js';

describe('devices and streams: plain-words failures', () => {
  it('explains a device count of 0: no CUDA build, no driver, or no visible device', () => {
    expect(explainNoDevice(false, 0, '')).toMatch(/no CUDA support/);
    expect(explainNoDevice(true, 0, 'CUDA driver version is insufficient for CUDA runtime version')).toMatch(
      /^no CUDA driver on this machine, so no CUDA device \(CUDA driver version is insufficient/,
    );
    expect(explainNoDevice(true, 13000, 'no CUDA-capable device is detected')).toMatch(/driver is installed but no device is visible/);
  });

  it("names the driver requirement when the driver is older than the build's CUDA, not CUDA_VISIBLE_DEVICES", () => {
    const insufficient = 'CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)';
    expect(explainNoDevice(true, 12040, insufficient, 13000)).toBe(
      'no CUDA device: the NVIDIA driver is older than CUDA 13 needs (580 or later); it supports CUDA 12.4 (cudaErrorInsufficientDriver)',
    );
    expect(explainNoDevice(true, 11080, insufficient, 12080)).toBe(
      'no CUDA device: the NVIDIA driver is older than CUDA 12 needs (525 or later); it supports CUDA 11.8 (cudaErrorInsufficientDriver)',
    );
    // the runtime's error alone is enough (an addon that does not report its runtime version)
    expect(explainNoDevice(true, 12040, insufficient)).toMatch(
      /^no CUDA device: the NVIDIA driver is older than this build's CUDA runtime needs; it supports CUDA 12\.4/,
    );
    // an older major than the runtime's, whatever the message
    expect(explainNoDevice(true, 12090, 'no CUDA-capable device is detected (cudaErrorNoDevice)', 13000)).toMatch(
      /older than CUDA 13 needs \(580 or later\)/,
    );
    // a driver of the same major (minor version compatibility) with no device: visibility, as before
    expect(explainNoDevice(true, 13000, 'no CUDA-capable device is detected (cudaErrorNoDevice)', 13020)).toMatch(/CUDA_VISIBLE_DEVICES/);
    expect(explainNoDevice(true, 12040, insufficient, 13000)).not.toMatch(/CUDA_VISIBLE_DEVICES/);
  });

  it.skipIf(hasCudaDevice())('asking for a CUDA device where there is none says so', () => {
    expect(() => cudaDevice(0)).toThrow(InvalidStateError);
    expect(() => cudaDevice(0)).toThrow(/cuda:0 is not available: no CUDA/);
    expect(() => cudaDevice(-1)).toThrow(RangeError);
  });

  it('Stream.create with something that is not a Device is a TypeError', () => {
    for (const bad of [undefined, null, 0, 'cuda:0', {}, { kind: 'gpu', index: 0 }]) {
      expect(() => Stream.create(bad as never)).toThrow(TypeError);
    }
    expect(() => Stream.create(null as never)).toThrow(/Expected a Device \(cudaDevice\(i\) or hostDevice\) for device but received null/);
    const s = Stream.create(hostDevice);
    s.destroy();
  });

  it('a failed CUDA call from the addon becomes a CudaError', () => {
    const raw = Object.assign(new Error('invalid resource handle'), {
      code: 'GPUMEM_CUDA',
      cudaError: 400,
      cudaErrorName: 'cudaErrorInvalidResourceHandle',
    });
    const e = (() => {
      try {
        return nativeCall('synchronizeStream', () => {
          throw raw;
        });
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(CudaError);
    expect(e).toMatchObject({
      cudaError: 400,
      cudaErrorName: 'cudaErrorInvalidResourceHandle',
      message: 'synchronizeStream: invalid resource handle',
    });
  });
});
