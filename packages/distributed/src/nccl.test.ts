/**
 * NCCL communicators (./nccl). Everywhere: ncclLibrary() never throws and says why NCCL cannot be
 * used, GPUMEM_NCCL_LIB naming a missing file gives an error naming it, and the arguments of
 * createNcclCommunicator are checked first. With a CUDA device and NCCL: one rank's allReduce,
 * allGather and broadcast on device memory, and collectives captured into a CUDA graph and then
 * launched. GPUMEM_REQUIRE_GPU=1 turns a missing GPU into a failure.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  addonCandidates,
  createAllocator,
  cudaDevice,
  CudaGraph,
  deviceStatus,
  hasCudaDevice,
  hostDevice,
  InvalidStateError,
  Stream,
} from '@gpumem/allocator-core';
import { CommAbortedError } from './communicator.js';
import { createNcclCommunicator, ncclLibrary, ncclUniqueId } from './nccl.js';

const gpu = hasCudaDevice();
const noGpuReason = gpu ? '' : deviceStatus();
if (!gpu && process.env.GPUMEM_REQUIRE_GPU === '1') throw new Error(`GPUMEM_REQUIRE_GPU=1 but ${noGpuReason}`);
const nccl = ncclLibrary();
const ready = gpu && nccl.available;
const skipReason = !gpu ? noGpuReason : `NCCL is not available: ${nccl.reason ?? ''}`;
const gpuTitle = (title: string) => (ready ? title : `${title} [skipped: ${skipReason}]`);

describe('NCCL library', () => {
  it('ncclLibrary() reports availability without throwing; when unavailable it says why', () => {
    expect(typeof nccl.available).toBe('boolean');
    if (nccl.available) {
      expect(nccl.version).toBeGreaterThan(2000);
    } else {
      expect(nccl.reason).toMatch(
        /NCCL not found: dlopen\('.+'\)( \(GPUMEM_NCCL_LIB\))? failed: .+; set GPUMEM_NCCL_LIB to the path of libnccl\.so\.2|CUDA support/,
      );
    }
  });

  it.skipIf(nccl.available)('without NCCL, ncclUniqueId and createNcclCommunicator throw InvalidStateError with the reason', () => {
    expect(() => ncclUniqueId()).toThrow(InvalidStateError);
    expect(() => ncclUniqueId()).toThrow(nccl.reason!);
    expect(() => createNcclCommunicator({ uniqueId: new Uint8Array(128), rank: 0, size: 1, device: 0 })).toThrow(InvalidStateError);
  });

  it('GPUMEM_NCCL_LIB naming a missing file: the error names the file, the variable and the fix', () => {
    const addon = addonCandidates().find((p) => existsSync(p));
    expect(addon).toBeDefined();
    const missing = '/nonexistent/gpumem-test/libnccl.so.2';
    const child = spawnSync(process.execPath, ['-e', 'console.log(JSON.stringify(require(process.env.GPUMEM_ADDON).ncclLibrary()))'], {
      env: { ...process.env, GPUMEM_ADDON: addon, GPUMEM_NCCL_LIB: missing },
      encoding: 'utf8',
    });
    expect(child.status, child.stderr).toBe(0);
    const report = JSON.parse(child.stdout) as { available: boolean; path: string; reason: string };
    expect(report.available).toBe(false);
    expect(report.path).toBe(missing);
    expect(report.reason).toContain(`NCCL not found: dlopen('${missing}') (GPUMEM_NCCL_LIB) failed: `);
    expect(report.reason).toMatch(/No such file or directory/);
    expect(report.reason).toContain(
      "set GPUMEM_NCCL_LIB to the path of libnccl.so.2 (PyTorch's wheels ship one under site-packages/nvidia/nccl/lib)",
    );
  });

  it('createNcclCommunicator checks its arguments before anything else', () => {
    const uniqueId = new Uint8Array(128);
    expect(() => createNcclCommunicator({ uniqueId: new Uint8Array(64), rank: 0, size: 1, device: 0 })).toThrow(TypeError);
    expect(() => createNcclCommunicator({ uniqueId: 'id' as never, rank: 0, size: 1, device: 0 })).toThrow(TypeError);
    expect(() => createNcclCommunicator({ uniqueId, rank: 0, size: 0, device: 0 })).toThrow(RangeError);
    expect(() => createNcclCommunicator({ uniqueId, rank: 1, size: 1, device: 0 })).toThrow(
      /Expected an integer in \[0, 0\] for rank but received 1/,
    );
    expect(() => createNcclCommunicator({ uniqueId, rank: 0, size: 1, device: -1 })).toThrow(RangeError);
    expect(() => createNcclCommunicator({ uniqueId, rank: 0, size: 1.5, device: 0 })).toThrow(RangeError);
    expect(() => createNcclCommunicator(null as never)).toThrow(TypeError);
  });
});

describe.skipIf(!ready)(gpuTitle('NCCL on a GPU (one rank)'), () => {
  const count = 1000;
  const values = Float32Array.from({ length: count }, (_, i) => i * 0.5 - 7);

  function setup() {
    const device = cudaDevice(0);
    const allocator = createAllocator('cuda', { device: 0 });
    const stream = Stream.create(device);
    const comm = createNcclCommunicator({ uniqueId: ncclUniqueId(), rank: 0, size: 1, device: 0 });
    const read = (ptr: number, n: number) => {
      const out = new Float32Array(n);
      allocator.read(ptr, out, 0, stream);
      return out;
    };
    const done = () => {
      comm.dispose();
      stream.destroy();
      allocator.dispose();
    };
    return { allocator, stream, comm, read, done };
  }

  it('allReduce, allGather and broadcast on device memory', () => {
    const { allocator, stream, comm, read, done } = setup();
    expect([comm.backend, comm.rank, comm.size, comm.capturable]).toEqual(['nccl', 0, 1, true]);
    const ptr = allocator.malloc(count * 4, stream);
    const recv = allocator.malloc(count * 4, stream);
    allocator.write(ptr, values, 0, stream);
    comm.allReduce(ptr, count, stream);
    expect(read(ptr, count)).toEqual(values);
    comm.allGather(ptr, recv, count, stream);
    expect(read(recv, count)).toEqual(values);
    comm.broadcast(ptr, count, 0, stream);
    expect(read(ptr, count)).toEqual(values);
    expect(() => comm.broadcast(ptr, count, 1, stream)).toThrow(RangeError);
    expect(() => comm.allReduce(ptr, count, Stream.default(hostDevice))).toThrow(TypeError);
    done();
    expect(() => comm.allReduce(ptr, count, stream)).toThrow(InvalidStateError);
  });

  it('collectives captured into a CUDA graph run when the graph is launched', () => {
    const { allocator, stream, comm, read, done } = setup();
    const ptr = allocator.malloc(count * 4, stream);
    const recv = allocator.malloc(count * 4, stream);
    allocator.write(ptr, values, 0, stream);
    allocator.write(recv, new Float32Array(count), 0, stream);
    const graph = CudaGraph.capture(stream, () => {
      comm.allReduce(ptr, count, stream);
      comm.allGather(ptr, recv, count, stream);
    });
    expect(read(recv, count)).toEqual(new Float32Array(count)); // captured, not run
    graph.launch();
    graph.launch();
    stream.synchronize();
    expect(read(recv, count)).toEqual(values);
    expect(read(ptr, count)).toEqual(values);
    graph.destroy();
    done();
  });

  it('after abort(), collectives throw CommAbortedError with the reason', () => {
    const { allocator, stream, comm, done } = setup();
    const ptr = allocator.malloc(count * 4, stream);
    comm.abort('stopping for the test');
    expect(() => comm.allReduce(ptr, count, stream)).toThrow(CommAbortedError);
    expect(() => comm.allReduce(ptr, count, stream)).toThrow('aborted: rank 0 failed: stopping for the test');
    done();
  });
});
