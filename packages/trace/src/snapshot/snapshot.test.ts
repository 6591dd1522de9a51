import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readTrace, serializeTrace, TraceFormatError, type AllocationTrace, type TraceEvent } from '../format.js';
import { pytorchBaseline, pytorchBaselineLabel } from '../baseline.js';
import { compileTrace } from '../replay.js';
import { isInternalFrame, readSnapshot, SnapshotFormatError, type SnapshotTrace } from './snapshot.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const MiB = 1 << 20;
const A = 139_800_000_000_000;
const B = 139_800_100_000_000;
const C = 139_799_000_000_000;
const E = 139_900_000_000_000;
const S1 = 0x55d5c0a0e3b0;
const S2 = 0x55d5c0b1f4c0;
const dir = mkdtempSync(join(tmpdir(), 'gpumem-snapshot-'));

/**
 * Device 0 of the fixtures, as the reader must give it (see fixtures/make_fixtures.py): allocations
 * made under train.py:42 (FWD, whose inner frame is torch's) are tagged 1, a free takes its
 * allocation's tag, the rest are 'other' (0).
 */
const device0Events: TraceEvent[] = [
  { timeNs: 1_000, action: 'alloc', ptr: A, bytes: 4_000_000, stream: 0, tag: 1, reservedBytes: 22 * MiB },
  { timeNs: 5_000, action: 'alloc', ptr: A + 4_000_256, bytes: 1_000_000, stream: 0, tag: 1, reservedBytes: 22 * MiB },
  { timeNs: 10_000, action: 'free', ptr: A, bytes: 4_000_000, stream: 0, tag: 1, reservedBytes: 22 * MiB },
  { timeNs: 21_000, action: 'alloc', ptr: B, bytes: 512, stream: S1, tag: 0, reservedBytes: 24 * MiB },
  { timeNs: 31_000, action: 'alloc', ptr: A, bytes: 2_000_000, stream: 0, tag: 1, reservedBytes: 24 * MiB },
  { timeNs: 40_000, action: 'free', ptr: B, bytes: 512, stream: S1, tag: 0, reservedBytes: 24 * MiB },
  { timeNs: 41_000, action: 'free', ptr: C, bytes: 8192, stream: 0, tag: 0, reservedBytes: 24 * MiB },
  { timeNs: 50_000, action: 'oom', ptr: 0, bytes: 40_000_000_000, stream: 0, tag: 0, reservedBytes: 24 * MiB },
];

describe('PyTorch memory snapshots', () => {
  it('reads the first device with history: exact events, frees at completion, OOMs with the requested size', async () => {
    const trace = await readSnapshot(fixture('snapshot-p4.pickle'));
    expect(trace.format).toBe('torch-snapshot');
    expect(trace.devices).toEqual([0, 1]);
    expect(trace.events).toEqual(device0Events);
  });

  it('reads protocols 2, 4 and 5 and a gzip-compressed snapshot alike', async () => {
    const p4 = await readSnapshot(fixture('snapshot-p4.pickle'));
    for (const name of ['snapshot-p2.pickle', 'snapshot-p5.pickle', 'snapshot-p4.pickle.gz']) {
      const other = await readSnapshot(fixture(name));
      expect(other.events, name).toEqual(p4.events);
      expect(other.pytorch, name).toEqual(p4.pytorch);
      expect(other.header, name).toEqual(p4.header);
    }
  });

  it("rebuilds PyTorch's reserved bytes over time, anchored on the final segments", async () => {
    const { pytorch, header } = await readSnapshot(fixture('snapshot-p4.pickle'));
    // a 2 MiB segment from before the history, then +20 MiB, +2 MiB, -2 MiB (empty_cache after the OOM)
    expect(pytorch).toEqual({
      reservedTimeline: { timeNs: [0, 0, 20_000, 60_000], reservedBytes: [2 * MiB, 22 * MiB, 24 * MiB, 22 * MiB] },
      peakReservedBytes: 24 * MiB,
      // 1 MiB + 8 KiB live before the history (segment D's block, and C), then 5 MB at most
      peakAllocatedBytes: MiB + 8192 + 5_000_000,
      peakAllocatedAtFreeRequestBytes: MiB + 8192 + 5_000_000,
      segmentAllocs: 2,
      segmentFrees: 1,
    });
    expect(header).toEqual({
      source: 'torch-snapshot',
      allocator: 'pytorch-cuda-caching',
      device: 'cuda:0',
      createdAt: '2024-11-19T07:06:40.000Z',
      tags: ['other', 'train.py:42:forward'],
      snapshot: {
        device: 0,
        entries: 16,
        actions: { segment_alloc: 2, alloc: 4, free_requested: 4, free_completed: 3, oom: 1, segment_free: 1, snapshot: 1 },
        deferredFrees: 1,
        pendingFreesAtEnd: 1,
        freesBeforeHistory: 1,
        reservedBeforeHistoryBytes: 2 * MiB,
        allocatedBeforeHistoryBytes: MiB + 8192,
        allocationFrames: 1,
        // device_free of the OOM entry, and what PyTorch reserved then
        firstOom: { timeNs: 50_000, requestedBytes: 40_000_000_000, deviceFreeBytes: 1_234_567, reservedBytes: 24 * MiB },
        allocatorSettings: {
          PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True',
          max_split_size: -1,
          garbage_collection_threshold: 0,
          expandable_segments: true,
          pinned_num_register_threads: 1,
          release_lock_on_cudamalloc: false,
          pinned_use_cuda_host_register: false,
          roundup_power2_divisions: { '1': 0, '2': 0, '4': 0 },
        },
      },
    });
  });

  it("gives the peak allocated as max_memory_allocated() counts it (until free_requested) beside the replay's (until free_completed)", async () => {
    const { pytorch, events } = await readSnapshot(fixture('two-streams.pickle.gz'));
    let live = 0;
    let peak = 0;
    for (const e of events) {
      live += e.action === 'alloc' ? e.bytes : e.action === 'free' ? -e.bytes : 0;
      peak = Math.max(peak, live);
    }
    expect(pytorch.peakAllocatedBytes).toBe(peak);
    expect(pytorch.peakAllocatedBytes).toBe(453_014_058);
    // frees completed after the side stream's work: the program's own frees came earlier
    expect(pytorch.peakAllocatedAtFreeRequestBytes).toBe(435_192_355);
  });

  it("explains PyTorch's peak allocated in its row: until free_completed, against max_memory_allocated()'s", async () => {
    const trace = await readSnapshot(fixture('two-streams.pickle.gz'));
    const baseline = pytorchBaseline(trace, compileTrace(trace))!;
    expect(baseline.peakAllocatedBytes).toBe(453_014_058);
    expect(baseline.peakAllocatedAtFreeRequestBytes).toBe(435_192_355);
    expect(baseline.peakAllocatedNote).toMatch(
      /until its free completed \(free_completed.*max_memory_allocated\(\) stops counting at the free call \(free_requested\): 415\.03 MiB on this trace/,
    );
    const same = await readSnapshot(fixture('snapshot-p4.pickle'));
    expect(pytorchBaseline(same, compileTrace(same))!.peakAllocatedNote).toMatch(/makes no difference on this trace/);
  });

  it('tags each allocation with its innermost user frame (file:line:function), its free with the same tag', async () => {
    const trace = await readSnapshot(fixture('two-streams.pickle.gz'));
    const tags = trace.header.tags!;
    expect(tags[0]).toBe('other');
    // torch's own frames and the standard library's are passed over; the pinning thread has no user frame
    expect([...tags.slice(1)].sort()).toEqual(['/home/user/model.py:31:attention', '/home/user/model.py:58:mlp', 'train.py:57:step']);
    expect(trace.header.snapshot.allocationFrames).toBe(3);
    const live = new Map<number, number>();
    const bytesByTag = new Array<number>(tags.length).fill(0);
    for (const e of trace.events) {
      if (e.action === 'alloc') {
        live.set(e.ptr, e.tag);
        bytesByTag[e.tag]! += e.bytes;
      } else if (e.action === 'free' && live.has(e.ptr)) {
        expect(e.tag).toBe(live.get(e.ptr));
        live.delete(e.ptr);
      }
    }
    // tags are numbered by the bytes their frame allocated, most first
    expect(bytesByTag.slice(1)).toEqual([...bytesByTag.slice(1)].sort((a, b) => b - a));
    expect(bytesByTag[0]).toBeGreaterThan(0);
  });

  it('keeps at most maxFrameTags frames as tags: the rest are "other"; no stacks, no tags', async () => {
    const full = await readSnapshot(fixture('two-streams.pickle.gz'));
    const one = await readSnapshot(fixture('two-streams.pickle.gz'), { maxFrameTags: 1 });
    expect(one.header.tags).toEqual(['other', full.header.tags![1]]);
    expect(one.events.map((e) => (e.tag === 1 ? 1 : 0))).toEqual(full.events.map((e) => (e.tag === 1 ? 1 : 0)));
    const untimed = await readSnapshot(fixture('untimed.pickle'), { device: 1 }); // recorded without frames
    expect(untimed.header.tags).toBeUndefined();
    expect(untimed.events.every((e) => e.tag === 0)).toBe(true);
    await expect(readSnapshot(fixture('two-streams.pickle.gz'), { maxFrameTags: -1 })).rejects.toThrow(
      /non-negative integer for maxFrameTags/,
    );
  });

  it('reads a memoized frame with a huge filename, shared by thousands of frames lists, in bounded memory', async () => {
    // 25,000 entries whose one-frame lists all hold the same 600 KB filename: a label per list would be 15 GB.
    const before = process.memoryUsage().heapUsed;
    const t = await readSnapshot(fixture('frame-bomb.pickle.gz'));
    expect(t.events).toHaveLength(25_000);
    expect(t.header.tags).toHaveLength(2);
    const label = t.header.tags![1]!;
    expect(label.length).toBeLessThan(600);
    expect(label).toMatch(/^…x+\.py:1:f$/);
    expect(t.events.filter((e) => e.action === 'alloc').every((e) => e.tag === 1)).toBe(true);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(512 * 2 ** 20);
  });

  it("tells frames of PyTorch and of the Python runtime from the user's", () => {
    for (const internal of [
      '/usr/lib/python3.11/site-packages/torch/nn/modules/module.py',
      'torch/_tensor.py',
      '<frozen runpy>',
      '??',
      '/usr/lib/python3.11/threading.py',
      '/opt/conda/lib/python3.10/contextlib.py',
      'c10/core/Allocator.cpp',
      '/usr/lib/libtorch_cuda.so',
    ]) {
      expect(isInternalFrame(internal), internal).toBe(true);
    }
    for (const user of [
      'train.py',
      '/home/user/model.py',
      '/usr/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py',
      '/home/user/torchvision_utils.py',
    ]) {
      expect(isInternalFrame(user), user).toBe(false);
    }
  });

  it('reads the device asked for: expandable segments (map/unmap), an unknown action counted and skipped', async () => {
    const trace = await readSnapshot(fixture('snapshot-p4.pickle'), { device: 1 });
    expect(trace.header.device).toBe('cuda:1');
    expect(trace.events).toEqual([
      { timeNs: 1_000, action: 'alloc', ptr: E, bytes: 6 * MiB, stream: S2, tag: 0, reservedBytes: 20 * MiB },
      { timeNs: 3_000, action: 'alloc', ptr: E + 6 * MiB, bytes: 3 * MiB, stream: S2, tag: 0, reservedBytes: 20 * MiB },
      { timeNs: 5_000, action: 'free', ptr: E, bytes: 6 * MiB, stream: S2, tag: 0, reservedBytes: 20 * MiB },
    ]);
    expect(trace.pytorch).toEqual({
      reservedTimeline: { timeNs: [0, 0, 6_000], reservedBytes: [0, 20 * MiB, 12 * MiB] },
      peakReservedBytes: 20 * MiB,
      peakAllocatedBytes: 9 * MiB,
      peakAllocatedAtFreeRequestBytes: 9 * MiB,
      segmentAllocs: 1,
      segmentFrees: 1,
    });
    expect(trace.header.snapshot).toMatchObject({
      entries: 7,
      actions: { workspace_snapshot: 1 },
      deferredFrees: 0,
      pendingFreesAtEnd: 0,
      freesBeforeHistory: 0,
    });
  });

  it('refuses a device without history, listing those with', async () => {
    for (const device of [2, 7]) {
      await expect(readSnapshot(fixture('snapshot-p4.pickle'), { device })).rejects.toMatchObject({
        name: 'TraceFormatError',
        message: `${fixture('snapshot-p4.pickle')}: device ${device} has no allocation history in this snapshot; devices with entries: 0, 1`,
      });
    }
    await expect(readSnapshot(fixture('snapshot-p4.pickle'), { device: -1 })).rejects.toBeInstanceOf(RangeError);
  });

  it('explains a snapshot recorded without history', async () => {
    const file = fixture('no-history.pickle');
    const e = await readSnapshot(file).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(TraceFormatError);
    expect((e as Error).message).toBe(
      `no allocation history in ${file}: call torch.cuda.memory._record_memory_history() before running the program, then _dump_snapshot()`,
    );
    // torch.cuda.memory_snapshot()'s list of segments, pickled: no history either
    await expect(readSnapshot(fixture('segments-only.pickle'))).rejects.toMatchObject({
      message: expect.stringMatching(/^no allocation history in .*segments-only\.pickle \(it holds a list.*_record_memory_history\(\)/),
    });
  });

  it('flags a probably full ring buffer, and keeps frees of allocations made before the history', async () => {
    const trace = await readSnapshot(fixture('ring-full.pickle'));
    expect(trace.header.snapshot).toMatchObject({ entries: 1000, maxEntriesHint: 1000, freesBeforeHistory: 4 });
    expect(trace.events.slice(0, 4).map((e) => e.action)).toEqual(['free', 'free', 'free', 'free']);
    const compiled = compileTrace(trace);
    expect(compiled.unmatchedFrees).toBe(4);
    expect(compiled.allocs).toBe(compiled.frees);
    const small = await readSnapshot(fixture('snapshot-p4.pickle'));
    expect(small.header.snapshot.maxEntriesHint).toBeUndefined();
  });

  it('orders entries without time_us (PyTorch 2.0) by their index', async () => {
    const trace = await readSnapshot(fixture('untimed.pickle'));
    expect(trace.devices).toEqual([1]);
    expect(trace.header.snapshot.timesFromOrder).toBe(true);
    expect(trace.header.createdAt).toBeUndefined();
    expect(trace.events.map((e) => e.timeNs)).toEqual([1_000, 2_000, 4_000]);
  });

  it("is PyTorch's recorded baseline of a replay", async () => {
    const trace = await readSnapshot(fixture('snapshot-p4.pickle'));
    const compiled = compileTrace(trace);
    expect(compiled).toMatchObject({
      allocs: 4,
      frees: 2,
      unmatchedFrees: 1,
      traceOoms: 1,
      peakReservedBytes: 24 * MiB,
      streamIds: [0, S1],
    });
    const baseline = pytorchBaseline(trace, compiled)!;
    expect(baseline).toMatchObject({ label: pytorchBaselineLabel, peakReservedBytes: 24 * MiB, driverAllocs: 2, driverFrees: 1 });
    // the first point at peak reserved (24 MiB, at 20 µs): 4 MB + 1 MB allocated then, 3 MB freed → 1 MB live
    expect(baseline.allocatedAtPeakBytes).toBe(1_000_000);
  });

  it('converts to gpumem JSONL and reads back', async () => {
    const trace = await readSnapshot(fixture('snapshot-p4.pickle'));
    const file = join(dir, 'converted.jsonl');
    writeFileSync(file, serializeTrace(trace, 'jsonl'));
    const back = await readTrace(file);
    expect(back.events).toEqual(trace.events);
    expect(back.header.source).toBe('torch-snapshot');
  });

  it('names the place in the snapshot of a malformed entry', async () => {
    const e = (await readSnapshot(fixture('bad-entry.pickle')).catch((err: unknown) => err)) as TraceFormatError;
    expect(e).toBeInstanceOf(SnapshotFormatError);
    expect(e).toMatchObject({ where: 'device_traces[0][1]', line: 0 });
    expect(e.message).toBe(`${fixture('bad-entry.pickle')}: device_traces[0][1]: 'size' must be an int, found str`);
    await expect(readSnapshot(fixture('huge-address.pickle'))).rejects.toMatchObject({
      message: expect.stringMatching(/device_traces\[0\]\[0\]: 'addr' is 18446744073709547520, beyond 2\^53 - 1$/),
    });
  });

  it("refuses an OOM entry whose device_free and reserve pass 2^53 - 1 bytes, in the snapshot's words", async () => {
    const e = (await readSnapshot(fixture('free-max.pickle')).catch((err: unknown) => err)) as TraceFormatError;
    expect(e).toBeInstanceOf(SnapshotFormatError);
    expect(e.message).toBe(
      `${fixture('free-max.pickle')}: device_traces[0][2]: 'device_free' is 9007199254740991 bytes: with the 2097152 bytes PyTorch reserved then, more than 2^53 - 1 bytes of device memory, which no device has (a corrupt snapshot)`,
    );
  });
});

describe('readTrace on snapshots and gzip files', () => {
  it('tells a snapshot by its content, whatever its name', async () => {
    const renamed = join(dir, 'snapshot-without-extension');
    copyFileSync(fixture('snapshot-p2.pickle'), renamed);
    const trace = (await readTrace(renamed)) as SnapshotTrace;
    expect(trace.format).toBe('torch-snapshot');
    expect(trace.events).toEqual(device0Events);
    const gz = (await readTrace(fixture('snapshot-p4.pickle.gz'), { device: 1 })) as SnapshotTrace;
    expect(gz.header.device).toBe('cuda:1');
    await expect(readTrace(fixture('no-history.pickle'))).rejects.toMatchObject({
      name: 'TraceFormatError',
      message: expect.stringMatching(/^no allocation history in /),
    });
  });

  it('reads gzip-compressed JSONL and RMM CSV', async () => {
    const trace: AllocationTrace = { header: { source: 'test' }, events: device0Events.map(({ reservedBytes: _, ...e }) => e) };
    for (const format of ['jsonl', 'rmm-csv'] as const) {
      const file = join(dir, `t.${format}.gz`);
      writeFileSync(file, gzipSync(serializeTrace(trace, format)));
      const back = await readTrace(file);
      expect(back.format).toBe(format);
      expect(back.events.map((e) => [e.action, e.ptr, e.bytes])).toEqual(trace.events.map((e) => [e.action, e.ptr, e.bytes]));
    }
  });

  it('refuses a corrupt, truncated or oversized gzip file with a TraceFormatError', async () => {
    const jsonl = gzipSync(serializeTrace({ header: { source: 'test' }, events: device0Events }, 'jsonl'));
    const truncated = join(dir, 'truncated.jsonl.gz');
    writeFileSync(truncated, jsonl.subarray(0, jsonl.length - 12));
    await expect(readTrace(truncated)).rejects.toMatchObject({
      name: 'TraceFormatError',
      reason: expect.stringMatching(/gzip stream is corrupt or truncated/),
    });
    const corrupt = join(dir, 'corrupt.gz');
    writeFileSync(corrupt, Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff, 0xde, 0xad, 0xbe, 0xef]));
    await expect(readTrace(corrupt)).rejects.toMatchObject({ name: 'TraceFormatError', reason: expect.stringMatching(/gzip/) });
    await expect(readTrace(truncated, { maxDecompressedBytes: 100 })).rejects.toMatchObject({
      name: 'TraceFormatError',
      reason: expect.stringMatching(/decompresses to more than 100 bytes/),
    });
    const pickleGz = readFileSync(fixture('snapshot-p4.pickle.gz'));
    await expect(readSnapshot(fixture('snapshot-p4.pickle.gz'), { maxDecompressedBytes: 1000 })).rejects.toMatchObject({
      message: expect.stringMatching(/snapshot-p4\.pickle\.gz: gzip: decompresses to more than 1000 bytes$/),
    });
    const cut = join(dir, 'cut.pickle.gz');
    writeFileSync(cut, pickleGz.subarray(0, pickleGz.length - 20));
    await expect(readTrace(cut)).rejects.toMatchObject({
      name: 'TraceFormatError',
      message: expect.stringMatching(/cut\.pickle\.gz: the gzip stream is corrupt or truncated/),
    });
  });
});
