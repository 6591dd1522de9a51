/**
 * Stream workspaces on the host path (no GPU needed): the ops' bind/unbind checks, and the
 * trainer's Runtime allocating, binding, unbinding and freeing them through its allocator. The GPU
 * side (ops never allocating for themselves during training) is in trainer-gpu.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createAllocator, hostDevice, loadNative, Stream, type Allocator, type Device } from '@gpumem/allocator-core';
import type { NativeOps } from '../packages/gnn/src/framework/native-ops.js';
import { allocationTags, Runtime } from '../packages/gnn/src/framework/runtime.js';
import { train } from '../packages/gnn/src/training/train.js';

const ops = (loadNative() as unknown as { ops: NativeOps }).ops;
const MiB = 2 ** 20;

/** Host memory that says it is on a GPU: the Runtime then asks for the GPU's workspace sizes. */
function gpuLookingHost(): Allocator {
  const host = createAllocator('host');
  const device: Device = Object.freeze({ kind: 'cuda', index: 0, id: 'cuda:0' }) as Device;
  return new Proxy(host, {
    get(target, key) {
      if (key === 'device') return device;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('stream workspaces: the ops side', () => {
  it('sizes: a 2 MiB scratch bound on the GPU, nothing on the CPU', () => {
    expect(ops.workspaceBytes(false)).toEqual({ scratchBytes: 0, blasBytes: 0 });
    const gpu = ops.workspaceBytes(true);
    expect(gpu.scratchBytes).toBe(2 * MiB);
    expect([0, 32 * MiB]).toContain(gpu.blasBytes); // 0 where cuBLAS does not load
  });

  it('binds once per stream, unbinds once, and rejects bad input leaving nothing bound', () => {
    const s = Stream.create(hostDevice);
    try {
      ops.bindStreamWorkspace(false, s.handle, 0, 0, 0, 0);
      expect(() => ops.bindStreamWorkspace(false, s.handle, 0, 0, 0, 0)).toThrow(/already has a workspace bound/);
      ops.unbindStreamWorkspace(false, s.handle);
      expect(() => ops.unbindStreamWorkspace(false, s.handle)).toThrow(/has no workspace bound/);

      const { blasBytes } = ops.workspaceBytes(true);
      expect(() => ops.bindStreamWorkspace(true, s.handle, 4096, 100, 8192, blasBytes)).toThrow(
        'Expected at least 2097152 for scratchBytes (ops.workspaceBytes) but received 100',
      );
      expect(() => ops.bindStreamWorkspace(true, s.handle, 0, 2 * MiB, 8192, blasBytes)).toThrow(TypeError);
      expect(() => ops.bindStreamWorkspace(true, s.handle, 4096, -1, 8192, blasBytes)).toThrow(
        'Expected non-negative integer for scratchBytes but received -1',
      );
      expect(() => ops.unbindStreamWorkspace(true, s.handle)).toThrow(/has no workspace bound/); // none was
    } finally {
      s.destroy();
    }
  });
});

describe('stream workspaces: the Runtime', () => {
  it("allocates each stream's workspace from its allocator under 'setup', once, and frees all on dispose", () => {
    const allocator = gpuLookingHost();
    const main = Stream.create(hostDevice);
    const side = Stream.create(hostDevice);
    const { scratchBytes, blasBytes } = ops.workspaceBytes(true);
    const rt = new Runtime(allocator, main);
    const tags: string[] = [];
    rt.setTagger((t) => tags.push(allocationTags[t]!));
    try {
      rt.tag('forward');
      rt.bindWorkspace(main);
      rt.bindWorkspace(side);
      rt.bindWorkspace(main); // already bound: nothing more
      expect(allocator.stats().allocatedBytes).toBe(2 * (scratchBytes + blasBytes));
      expect(tags).toEqual(['other', 'forward', 'setup', 'forward', 'setup', 'forward']);
      expect(() => ops.bindStreamWorkspace(true, side.handle, 1, scratchBytes, 1, blasBytes)).toThrow(/already has a workspace/);
      rt.dispose();
      expect(allocator.stats().allocatedBytes).toBe(0);
      // Unbound: the streams take a workspace again.
      ops.bindStreamWorkspace(false, main.handle, 0, 0, 0, 0);
      ops.unbindStreamWorkspace(false, main.handle);
      expect(() => ops.unbindStreamWorkspace(true, side.handle)).toThrow(/has no workspace bound/);
    } finally {
      main.destroy();
      side.destroy();
      allocator.dispose();
    }
  });

  it('training on the CPU binds a workspace, never falls back, and leaves the allocator empty', () => {
    const allocator = createAllocator('host');
    try {
      const before = ops.unboundWorkspaceAllocations();
      train({ model: 'mlp', allocator, epochs: 1, trainSubset: 128, testSubset: 64, hidden: [32], seed: 1 });
      expect(ops.unboundWorkspaceAllocations()).toBe(before);
      expect(allocator.stats().allocatedBytes).toBe(0);
    } finally {
      allocator.dispose();
    }
  });
});
