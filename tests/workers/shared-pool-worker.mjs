// A worker of tests/worker-threads.test.ts: attaches to the allocator the parent shared, then runs
// `ops` operations (ops/2 allocations and ops/2 frees) of mixed sizes on its own streams. Every
// block is filled with a tag unique to this worker and block right after it is allocated, and read
// back whole and compared just before it is freed: a block that overlapped another live block
// (of this worker or any other) would show the other's tag. Posts a summary when done.
import { parentPort, workerData } from 'node:worker_threads';
import { attachSharedAllocator, Stream } from '@gpumem/allocator-core';

const { handle, workerId, ops, seed, window, streams: streamCount } = workerData;

// xorshift32, seeded per worker
let x = (seed * 2654435761 + workerId * 40503 + 1) >>> 0 || 1;
const rand = () => {
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  return (x >>> 0) / 2 ** 32;
};

// Mostly small blocks, some of tens of KiB, a few of hundreds of KiB (sizes not rounded).
const maxBytes = 256 * 1024;
function size() {
  const r = rand();
  if (r < 0.8) return 1 + Math.floor(rand() * 4096);
  if (r < 0.99) return 4096 + Math.floor(rand() * 60 * 1024);
  return 64 * 1024 + Math.floor(rand() * (maxBytes - 64 * 1024));
}

const allocator = attachSharedAllocator(handle);
const streams = Array.from({ length: streamCount }, () => Stream.create(allocator.device));
const pattern = new Uint32Array(maxBytes / 4);
const patternBytes = new Uint8Array(pattern.buffer);
const readBack = new Uint8Array(maxBytes);
const live = []; // { ptr, bytes, tag, stream }
let allocations = 0;
let frees = 0;
let foreign = 0;
let firstForeign;
let bytesAllocated = 0;

function allocate() {
  const bytes = size();
  const stream = streams[allocations % streams.length];
  const ptr = allocator.malloc(bytes, stream);
  // tag: worker id in the top 8 bits, the block's sequence number below
  const tag = ((workerId + 1) << 24) | (allocations & 0xffffff);
  pattern.fill(tag, 0, Math.ceil(bytes / 4));
  allocator.write(ptr, patternBytes.subarray(0, bytes), 0, stream);
  live.push({ ptr, bytes, tag, stream });
  allocations++;
  bytesAllocated += bytes;
}

function release(index) {
  const block = live[index];
  live[index] = live[live.length - 1];
  live.pop();
  const got = readBack.subarray(0, block.bytes);
  allocator.read(block.ptr, got, 0, block.stream);
  pattern.fill(block.tag, 0, Math.ceil(block.bytes / 4));
  if (Buffer.compare(got, patternBytes.subarray(0, block.bytes)) !== 0) {
    foreign++;
    if (firstForeign === undefined) {
      const words = new Uint32Array(got.buffer, 0, Math.floor(block.bytes / 4));
      const bad = words.findIndex((w) => w !== block.tag);
      firstForeign = { ptr: block.ptr, bytes: block.bytes, expected: block.tag, found: bad >= 0 ? words[bad] : undefined, at: bad * 4 };
    }
  }
  // sometimes freed on another stream than the one that used it: recordStream keeps it from
  // being reused before that stream's work is done
  const stream = rand() < 0.1 ? streams[Math.floor(rand() * streams.length)] : block.stream;
  if (stream !== block.stream) allocator.recordStream(block.ptr, block.stream);
  allocator.free(block.ptr, block.bytes, stream);
  frees++;
}

const t0 = performance.now();
for (let i = 0; i < ops / 2; i++) {
  allocate();
  if (live.length > window) release(Math.floor(rand() * live.length));
}
while (live.length > 0) release(live.length - 1);
const ms = performance.now() - t0;
for (const s of streams) s.destroy();
allocator.dispose(); // detaches only
parentPort.postMessage({ workerId, allocations, frees, foreign, firstForeign, bytesAllocated, ms });
