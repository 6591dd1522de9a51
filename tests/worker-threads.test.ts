/**
 * One native pool shared by several worker_threads (shareHandle / attachSharedAllocator): each
 * worker loads the addon itself, allocates mixed sizes, writes a tag unique to it and the block,
 * reads the block back whole before freeing it, and frees in random order, sometimes on another
 * stream. At the end no worker may have seen another block's tag (no overlap) and the shared
 * statistics must be exact. Over host memory it runs everywhere; the same over cudaMalloc needs a
 * GPU. The workers import the built packages (npm ci builds them), as a user's workers would.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import {
  attachSharedAllocator,
  createAllocator,
  InvalidStateError,
  NativeAllocator,
  type SharedAllocatorHandle,
} from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import { gpuAvailable, gpuTitle } from './gpu.js';

const workerUrl = new URL('./workers/shared-pool-worker.mjs', import.meta.url);

interface WorkerReport {
  workerId: number;
  allocations: number;
  frees: number;
  foreign: number;
  firstForeign?: unknown;
  bytesAllocated: number;
  ms: number;
}

function runWorker(handle: SharedAllocatorHandle, workerId: number, ops: number): Promise<WorkerReport> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(workerUrl, { workerData: { handle, workerId, ops, seed: 7, window: 64, streams: 2 } });
    let report: WorkerReport | undefined;
    worker.once('message', (m: WorkerReport) => (report = m));
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (code !== 0 || !report) reject(new Error(`worker ${workerId} exited with code ${code} and ${report ? 'a' : 'no'} report`));
      else resolve(report);
    });
  });
}

/** Runs `workers` workers of `opsPerWorker` operations each on one shared pool and checks everything. */
async function sharedPoolRun(upstream: 'host' | 'cuda', workers: number, opsPerWorker: number): Promise<void> {
  const pool = createAllocator('pool', { upstream });
  expect(pool).toBeInstanceOf(NativeAllocator);
  const handle = (pool as NativeAllocator).shareHandle();
  const reports = await Promise.all(Array.from({ length: workers }, (_, id) => runWorker(handle, id, opsPerWorker)));
  for (const r of reports) {
    expect(r.firstForeign, `worker ${r.workerId} read another block's tag`).toBeUndefined();
    expect(r.foreign).toBe(0);
    expect(r.allocations).toBe(opsPerWorker / 2);
    expect(r.frees).toBe(opsPerWorker / 2);
  }
  const total = workers * opsPerWorker;
  const s = pool.stats();
  expect(s.allocCount).toBe(total / 2);
  expect(s.freeCount).toBe(total / 2);
  expect(s.allocatedBytes).toBe(0);
  expect(s.peakAllocatedBytes).toBeGreaterThan(0);
  expect(s.reservedBytes).toBeGreaterThan(0);
  expect(s.oomCount).toBe(0);
  // the pool still works here, and gives its cached memory back
  const p = pool.malloc(1000);
  pool.free(p, 1000);
  pool.trim();
  expect(pool.stats().reservedBytes).toBe(0);
  pool.dispose();
}

describe('worker_threads sharing one native pool', () => {
  it('4 workers x 250,000 operations on a host pool: no overlap, exact statistics', async () => {
    await sharedPoolRun('host', 4, 250_000);
  });

  it('an attached allocator shares memory and statistics; dispose() only detaches', () => {
    const owner = createAllocator('pool', { upstream: 'host' }) as NativeAllocator;
    const handle = owner.shareHandle();
    expect(owner.shareHandle()).toEqual(handle); // one token per sharing allocator
    const attached = attachSharedAllocator(handle);
    expect(attached.name).toBe('pool');
    expect(attached.device.kind).toBe('host');
    const p = attached.malloc(4096);
    owner.write(p, new Uint32Array([1, 2, 3])); // a pointer from one is live in the other
    expect(owner.stats().allocatedBytes).toBe(4096);
    owner.dispose(); // lets go of its share: the memory stays for the attached one
    const back = new Uint32Array(3);
    attached.read(p, back);
    expect([...back]).toEqual([1, 2, 3]);
    attached.free(p, 4096);
    expect(attached.stats().allocCount).toBe(1);
    expect(attached.stats().freeCount).toBe(1);
    attached.dispose();
    expect(() => attached.malloc(8)).toThrow(InvalidStateError);
    // the owner revoked the token when it let go; nothing holds the chain any more
    expect(() => attachSharedAllocator(handle)).toThrow(InvalidStateError);
    expect(() => attachSharedAllocator(handle)).toThrow(/no shared allocator has token/);
  });

  it('a worker attaching after the owner was disposed gets InvalidStateError, not a crash', async () => {
    const owner = createAllocator('host') as NativeAllocator;
    const handle = owner.shareHandle();
    owner.dispose();
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      import('@gpumem/allocator-core').then(({ attachSharedAllocator }) => {
        try { attachSharedAllocator(workerData); parentPort.postMessage('attached'); }
        catch (e) { parentPort.postMessage(e.name + ': ' + e.message); }
      });`;
    const message = await new Promise<string>((resolve, reject) => {
      const w = new Worker(code, { eval: true, workerData: handle });
      w.once('message', resolve);
      w.once('error', reject);
    });
    expect(message).toMatch(/^InvalidStateError: .*no shared allocator has token/);
  });

  it('rejects malformed handles with a typed error naming the field', () => {
    expect(() => attachSharedAllocator(null as never)).toThrow(TypeError);
    expect(() => attachSharedAllocator({ token: -1, name: 'pool', device: { kind: 'host', index: -1 } })).toThrow(
      /Expected a positive integer for handle.token but received -1/,
    );
    expect(() => attachSharedAllocator({ token: 1.5, name: 'pool', device: { kind: 'host', index: -1 } })).toThrow(RangeError);
    expect(() => attachSharedAllocator({ token: 1, name: '', device: { kind: 'host', index: -1 } })).toThrow(/handle.name/);
    expect(() => attachSharedAllocator({ token: 1, name: 'pool', device: { kind: 'tpu' as never, index: 0 } })).toThrow(
      /handle.device.kind/,
    );
    expect(() => attachSharedAllocator({ token: 2 ** 40, name: 'pool', device: { kind: 'host', index: -1 } })).toThrow(InvalidStateError);
  });
});

describe.skipIf(!gpuAvailable)(gpuTitle('worker_threads sharing one native pool on the GPU'), () => {
  it('4 workers x 40,000 operations on a cudaMalloc pool: no overlap, exact statistics', async () => {
    await sharedPoolRun('cuda', 4, 40_000);
  });
});
