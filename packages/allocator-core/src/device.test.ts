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
