/**
 * The host communicator (./host-comm): ranks are real processes (fixtures/host-rank.mjs, on the
 * built package) using buffers of the 'host' allocator. allReduce is bit-identical on every rank
 * and equals the f32 sum in rank order, collectives larger than a slot go in chunks, allGather
 * works separate and in place, broadcast from any root; an abort by a rank or by the parent, and a
 * rank that never arrives, end the others' collectives with CommAbortedError. In this process (one
 * rank): bad arguments are typed errors that leave the communicator usable, and dispose() ends it.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addonCandidates, createAllocator, hostDevice, InvalidStateError, Stream, type Device } from '@gpumem/allocator-core';
import { CommAbortedError } from './communicator.js';
import { attachHostCommunicator, createHostCommRegion, type HostCommRegion } from './host-comm.js';
import { rankValues } from './fixtures/rank-values.mjs';

interface RankOutput {
  result?: Float32Array;
  error?: { name: string; message: string; code?: string };
}

const addon = addonCandidates().find((p) => existsSync(p));
// The rank runs as plain Node on the built package (as a launched rank does), so this needs a build.
const rankScript = fileURLToPath(new URL('./fixtures/host-rank.mjs', import.meta.url));
const built = existsSync(fileURLToPath(new URL('../dist/index.js', import.meta.url)));
const needsBuild = built ? '' : 'packages/distributed is not built (npm run build): the ranks import the built package';

/** Runs one rank; resolves with what it printed. */
function runRank(job: Record<string, unknown>): Promise<RankOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [rankScript, JSON.stringify(job)], {
      env: { ...process.env, ...(addon ? { GPUMEM_ADDON: addon } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0 || !line) return reject(new Error(`rank ${String(job.rank)} exited with code ${code}: ${err.trim()}`));
      const parsed = JSON.parse(line) as { result?: string; error?: RankOutput['error'] };
      if (parsed.error) return resolve({ error: parsed.error });
      const bytes = Buffer.from(parsed.result ?? '', 'base64');
      resolve({ result: new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) });
    });
  });
}

/** Runs `scenario` on every rank of a new region and disposes the region. */
async function runGroup(size: number, job: Record<string, unknown>, slotBytes?: number): Promise<RankOutput[]> {
  const region = createHostCommRegion({ ranks: size, slotBytes });
  try {
    return await Promise.all(Array.from({ length: size }, (_, rank) => runRank({ ...job, name: region.name, rank, size })));
  } finally {
    region.dispose();
  }
}

function sumInRankOrder(size: number, count: number): Float32Array {
  const sum = rankValues(0, count);
  for (let r = 1; r < size; r++) {
    const v = rankValues(r, count);
    for (let i = 0; i < count; i++) sum[i] = Math.fround(sum[i]! + v[i]!);
  }
  return sum;
}

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');

describe.skipIf(needsBuild)(`host communicator across processes${needsBuild ? ` (skipped: ${needsBuild})` : ''}`, () => {
  it.each([2, 3])(
    'allReduce over %i ranks: the f32 sum in rank order, bit-identical on every rank, in chunks past slotBytes',
    async (size) => {
      const count = 5000; // 256-byte slots: 79 chunks
      const outputs = await runGroup(size, { scenario: 'allReduce', count }, 256);
      const expected = bits(sumInRankOrder(size, count));
      for (const o of outputs) {
        expect(o.error).toBeUndefined();
        expect(bits(o.result!)).toBe(expected);
      }
    },
  );

  it('allGather, separate and in place, over 3 ranks in chunks', async () => {
    const count = 700;
    const expected = new Float32Array(3 * count);
    for (let r = 0; r < 3; r++) expected.set(rankValues(r, count), r * count);
    for (const scenario of ['allGather', 'allGatherInPlace']) {
      const outputs = await runGroup(3, { scenario, count }, 1024);
      for (const o of outputs) expect(bits(o.result!)).toBe(bits(expected));
    }
  });

  it('broadcast from rank 2 and from rank 0', async () => {
    const count = 1000;
    for (const root of [2, 0]) {
      const outputs = await runGroup(3, { scenario: 'broadcast', count, root }, 512);
      for (const o of outputs) expect(bits(o.result!)).toBe(bits(rankValues(root, count)));
    }
  });

  it('an abort by one rank ends the others’ collectives with CommAbortedError', async () => {
    const region = createHostCommRegion({ ranks: 3 });
    try {
      const job = { name: region.name, size: 3, count: 64, timeoutMs: 20_000 };
      const outputs = await Promise.all([
        runRank({ ...job, rank: 0, scenario: 'allReduce' }),
        runRank({ ...job, rank: 1, scenario: 'abort', reason: 'loss became NaN' }),
        runRank({ ...job, rank: 2, scenario: 'allReduce' }),
      ]);
      expect(outputs[1]!.error).toBeUndefined();
      for (const o of [outputs[0]!, outputs[2]!]) {
        expect(o.error).toEqual({
          name: 'CommAbortedError',
          code: 'GPUMEM_COMM_ABORTED',
          message: 'aborted: rank 1 failed: loss became NaN',
        });
      }
    } finally {
      region.dispose();
    }
  });

  it('the parent’s abort ends the collectives of ranks waiting for one that never came', async () => {
    const region = createHostCommRegion({ ranks: 3 });
    try {
      const job = { name: region.name, size: 3, count: 64, scenario: 'allReduce' };
      const waiting = Promise.all([runRank({ ...job, rank: 0 }), runRank({ ...job, rank: 1 })]);
      await new Promise((r) => setTimeout(r, 500));
      region.abort(2, 'exited with code 1');
      region.abort(0, 'a later abort is ignored');
      for (const o of await waiting)
        expect(o.error).toEqual({
          name: 'CommAbortedError',
          code: 'GPUMEM_COMM_ABORTED',
          message: 'aborted: rank 2 failed: exited with code 1',
        });
    } finally {
      region.dispose();
    }
  });

  it('a rank that never arrives: CommAbortedError after timeoutMs naming it, on the other ranks too', async () => {
    const region = createHostCommRegion({ ranks: 3 });
    try {
      const job = { name: region.name, size: 3, count: 64, scenario: 'allReduce' };
      const [first, second] = await Promise.all([runRank({ ...job, rank: 0, timeoutMs: 300 }), runRank({ ...job, rank: 1 })]);
      expect(first!.error).toEqual({
        name: 'CommAbortedError',
        code: 'GPUMEM_COMM_ABORTED',
        message: expect.stringMatching(/^timed out after 300 ms in allReduce waiting for ranks (1,)?2$/),
      });
      const other = second!;
      expect(other.error?.name).toBe('CommAbortedError');
      expect(other.error?.message).toMatch(/^aborted: rank 0 failed: timed out after 300 ms in allReduce waiting for ranks (1,)?2$/);
    } finally {
      region.dispose();
    }
  });
});

describe.skipIf(needsBuild)(`host communicator whose launcher is gone${needsBuild ? ` (skipped: ${needsBuild})` : ''}`, () => {
  it('a collective waiting for a rank stops with CommAbortedError once the process that created the region has exited', async () => {
    const creator = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/region-creator.mjs', import.meta.url))], {
      env: { ...process.env, ...(addon ? { GPUMEM_ADDON: addon } : {}) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => creator.on('exit', resolve));
    const name = await new Promise<string>((resolve) => {
      let out = '';
      creator.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve(out.trim());
      });
    });
    const waiting = attachHostCommunicator({ name, rank: 0, size: 2, timeoutMs: 20_000 });
    const absent = attachHostCommunicator({ name, rank: 1, size: 2 }); // attached, never joins the collective
    creator.kill('SIGKILL');
    await exited; // reaped: the pid no longer exists
    const allocator = createAllocator('host');
    try {
      const ptr = allocator.malloc(16);
      // the launcher's absence, not the 20 s timeout (whose message says "timed out")
      expect(() => waiting.allReduce(ptr, 4, Stream.default(hostDevice))).toThrow(
        /^aborted: the process that created the region \(pid \d+, the launcher\) is gone$/,
      );
    } finally {
      waiting.dispose();
      absent.dispose();
      allocator.dispose();
    }
  });
});

describe('host communicator in this process', () => {
  let region: HostCommRegion;
  beforeAll(() => {
    region = createHostCommRegion({ ranks: 1, slotBytes: 64 });
  });
  afterAll(() => region.dispose());

  it('one rank: the collectives are copies; bad arguments are typed errors that change nothing; dispose() ends it', () => {
    const allocator = createAllocator('host');
    const stream = Stream.create(hostDevice);
    const comm = attachHostCommunicator({ name: region.name, rank: 0, size: 1, timeoutMs: 1000 });
    expect([comm.backend, comm.rank, comm.size, comm.capturable]).toEqual(['host', 0, 1, false]);
    const count = 100;
    const ptr = allocator.malloc(count * 4, stream);
    allocator.write(ptr, rankValues(0, count), 0, stream);

    expect(() => comm.allReduce(ptr, 0, stream)).toThrow(RangeError);
    expect(() => comm.allReduce(ptr, -1, stream)).toThrow(/Expected positive integer for count but received -1/);
    expect(() => comm.allReduce(ptr, 1.5, stream)).toThrow(RangeError);
    expect(() => comm.allReduce(ptr, NaN, stream)).toThrow(RangeError);
    expect(() => comm.allReduce(ptr, '4' as never, stream)).toThrow(TypeError);
    expect(() => comm.allReduce(0, 4, stream)).toThrow(/for buffer/);
    expect(() => comm.allReduce(2 ** 60, 4, stream)).toThrow(RangeError);
    expect(() => comm.allReduce(2 ** 53 - 8, 4, stream)).toThrow(/below 2\^53/);
    expect(() => comm.allGather(ptr, -3, 4, stream)).toThrow(/for recv/);
    expect(() => comm.broadcast(ptr, 4, 1, stream)).toThrow(/Expected an integer in \[0, 0\] for root but received 1/);
    expect(() => comm.broadcast(ptr, 4, -1, stream)).toThrow(RangeError);
    expect(() => comm.broadcast(ptr, 4, '0' as never, stream)).toThrow(TypeError);
    expect(() => comm.allReduce(ptr, 4, {} as never)).toThrow(TypeError);
    const cuda0: Device = Object.freeze({ kind: 'cuda', index: 0, id: 'cuda:0' });
    expect(() => comm.allReduce(ptr, 4, Stream.default(cuda0))).toThrow(/Expected a stream of host for stream but received one of cuda:0/);
    expect(() => comm.abort(42 as never)).toThrow(TypeError);

    comm.allReduce(ptr, count, stream); // 7 chunks of 16
    comm.broadcast(ptr, count, 0, Stream.default(hostDevice));
    const recv = allocator.malloc(count * 4, stream);
    comm.allGather(ptr, recv, count, stream);
    const out = new Float32Array(count);
    allocator.read(recv, out, 0, stream);
    expect(bits(out)).toBe(bits(rankValues(0, count)));

    comm.dispose();
    comm.dispose();
    expect(() => comm.allReduce(ptr, count, stream)).toThrow(InvalidStateError);
    expect(() => comm.abort('late')).toThrow(InvalidStateError);
    allocator.dispose();
  });

  it('attaching and creating check their arguments', () => {
    expect(() => attachHostCommunicator({ name: region.name, rank: 1, size: 1 })).toThrow(
      /Expected an integer in \[0, 0\] for rank but received 1/,
    );
    expect(() => attachHostCommunicator({ name: region.name, rank: 0, size: 0 })).toThrow(RangeError);
    expect(() => attachHostCommunicator({ name: region.name, rank: 0, size: 1, timeoutMs: -1 })).toThrow(RangeError);
    expect(() => attachHostCommunicator({ name: region.name, rank: 0, size: 1, device: 'host' as never })).toThrow(TypeError);
    expect(() => attachHostCommunicator({ name: 42 as never, rank: 0, size: 1 })).toThrow(TypeError);
    expect(() => attachHostCommunicator({ name: region.name, rank: 0, size: 2 })).toThrow(/Expected 1 \(the ranks of region/);
    expect(() => attachHostCommunicator({ name: '/gpumem-no-such-region', rank: 0, size: 1 })).toThrow(/no host communicator region named/);
    const held = attachHostCommunicator({ name: region.name, rank: 0, size: 1 });
    expect(() => attachHostCommunicator({ name: region.name, rank: 0, size: 1 })).toThrow(/already attached/);
    held.dispose();
    attachHostCommunicator({ name: region.name, rank: 0, size: 1 }).dispose();
    expect(() => createHostCommRegion({ ranks: 0 })).toThrow(RangeError);
    expect(() => createHostCommRegion({ ranks: 2, slotBytes: 66 })).toThrow(/multiple of 4/);
    expect(() => createHostCommRegion({ ranks: 2, slotBytes: 32 })).toThrow(RangeError);
    expect(() => region.abort(1, 'x')).toThrow(RangeError);
  });

  it('unlinkWhenAttached: the name goes when the last rank attaches, and the parent can still abort the group', () => {
    const r = createHostCommRegion({ ranks: 2, slotBytes: 64, unlinkWhenAttached: true });
    const shm = process.platform === 'linux' ? `/dev/shm${r.name}` : undefined;
    const allocator = createAllocator('host');
    const ptr = allocator.malloc(16);
    const rank0 = attachHostCommunicator({ name: r.name, rank: 0, size: 2 });
    if (shm) expect(existsSync(shm)).toBe(true);
    const rank1 = attachHostCommunicator({ name: r.name, rank: 1, size: 2 });
    if (shm) expect(existsSync(shm)).toBe(false);
    expect(() => attachHostCommunicator({ name: r.name, rank: 0, size: 2 })).toThrow(/no host communicator region named/);
    r.abort(-1, 'stopped by the parent');
    expect(() => rank0.allReduce(ptr, 4, Stream.default(hostDevice))).toThrow(CommAbortedError);
    expect(() => rank1.allReduce(ptr, 4, Stream.default(hostDevice))).toThrow(/^aborted: stopped by the parent$/);
    rank0.dispose();
    rank1.dispose();
    r.dispose();
    allocator.dispose();
    expect(() => createHostCommRegion({ ranks: 1, unlinkWhenAttached: 'yes' as never })).toThrow(TypeError);
  });

  it('a disposed region can no longer be attached to or aborted', () => {
    const r = createHostCommRegion({ ranks: 2 });
    r.dispose();
    r.dispose();
    expect(() => r.abort(0, 'x')).toThrow(InvalidStateError);
    expect(() => attachHostCommunicator({ name: r.name, rank: 0, size: 2 })).toThrow(/no host communicator region named/);
  });
});
