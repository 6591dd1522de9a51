#!/usr/bin/env node
// bench/soak: millions of mixed-size, multi-stream malloc/free operations against each strategy,
// sampling reserved and allocated bytes as it goes. A strategy passes ("bounded") when its
// reserved bytes in the second half of the run never exceed the most it reserved in the first
// half by more than the margin (no leak, no fragmentation creep), nothing stays allocated after
// the live set is freed, and no request failed. Prints a table and writes JSON.
//
//   node bench/soak/run.js [--ops N] [--driver-ops N] [--allocators a,b,...] [--streams N]
//                          [--live-bytes B] [--window N] [--samples N] [--margin F] [--seed N] [--out FILE]
//
// On a machine without a GPU only the host strategies run ('host' and 'pool-host', the pool over
// host memory). Strategies that make a driver call per operation ('cuda', 'uvm': tens of µs to
// milliseconds each) run --driver-ops operations instead of --ops, so that a run ends in minutes.
import { performance } from 'node:perf_hooks';
import {
  createAllocator,
  deviceProperties,
  formatBytes,
  hasCudaDevice,
  listAllocators,
  memoryInfo,
  OutOfMemoryError,
  Stream,
} from '@gpumem/allocator-core';
import { xorshift32 } from '@gpumem/allocator-core/tools';
import '@gpumem/allocator-uvm';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import { cliArgs } from '../lib/args.js';
import { printTable, writeJson } from '../lib/output.js';

const KiB = 1024;
const MiB = 2 ** 20;
const GiB = 2 ** 30;

const usage = `Usage: node bench/soak/run.js [flags]
  --ops N           operations (each malloc or free is one) per caching strategy (default 10000000)
  --driver-ops N    operations for 'cuda' and 'uvm', which call the driver on every operation
                    (default 200000: at tens of µs to ms a call, 10M would take hours)
  --allocators LIST comma-separated strategies or variants: host, pool-host, pool, async, cuda, uvm
                    (default: every one that can run here)
  --streams N       streams the operations spread over (default 4)
  --live-bytes B    cap on the bytes held live at once (default 1 GiB; on a GPU also at most a
                    quarter of cudaMemGetInfo's free memory)
  --window N        cap on the number of live allocations; the live set hovers around half of it
                    (default 2048)
  --samples N       reserved/allocated samples over the run (default 1000)
  --margin F        bounded: second-half max reserved <= first-half max x (1 + F) (default 0.1)
  --seed N          random seed (default 1)
  --out FILE        where to write the JSON (default bench/soak/out/<date>-<device>.json)`;

const { help, fail } = cliArgs(usage, 'bench/soak');

function positiveInt(raw, flag) {
  const v = Number(String(raw).replaceAll('_', ''));
  if (raw === undefined || !Number.isSafeInteger(v) || v <= 0) fail(`${flag} needs a positive integer (received '${raw}')`);
  return v;
}

function parseArgs(argv) {
  const args = {
    ops: 10_000_000,
    driverOps: 200_000,
    allocators: undefined,
    streams: 4,
    liveBytes: GiB,
    window: 2048,
    samples: 1000,
    margin: 0.1,
    seed: 1,
    out: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => argv[++i];
    if (a === '--ops') args.ops = positiveInt(value(), a);
    else if (a === '--driver-ops') args.driverOps = positiveInt(value(), a);
    else if (a === '--allocators') args.allocators = (value() ?? '').split(',').filter(Boolean);
    else if (a === '--streams') args.streams = positiveInt(value(), a);
    else if (a === '--live-bytes') args.liveBytes = positiveInt(value(), a);
    else if (a === '--window') args.window = positiveInt(value(), a);
    else if (a === '--samples') args.samples = positiveInt(value(), a);
    else if (a === '--seed') args.seed = positiveInt(value(), a);
    else if (a === '--out') args.out = value();
    else if (a === '--margin') {
      const raw = value();
      args.margin = Number(raw);
      if (raw === undefined || !Number.isFinite(args.margin) || args.margin < 0)
        fail(`--margin needs a non-negative number (received '${raw}')`);
    } else if (a === '-h' || a === '--help') help();
    else fail(`unknown option '${a}'`);
  }
  if (args.allocators !== undefined && args.allocators.length === 0) fail('--allocators needs at least one name');
  return args;
}

const gpu = hasCudaDevice();

// Variants per registered strategy: [label, options]. 'pool-host' is the pool over host memory.
function variantsOf(name) {
  switch (name) {
    case 'pool':
      return gpu
        ? [
            ['pool', { upstream: 'cuda' }],
            ['pool-host', { upstream: 'host' }],
          ]
        : [['pool-host', { upstream: 'host' }]];
    case 'uvm':
      return [['uvm', { logThresholdBytes: false }]];
    default:
      return [[name, {}]];
  }
}

const driverPerOp = new Set(['cuda', 'uvm']);

/** The runs asked for: [{ label, name, options }], in registration order. */
function selectRuns(requested) {
  const infos = listAllocators();
  const all = infos.flatMap((info) => variantsOf(info.name).map(([label, options]) => ({ label, name: info.name, options, info })));
  const runnable = (r) => gpu || !(r.info.requiresCuda || r.options.upstream === 'cuda');
  if (requested === undefined) return all.filter(runnable);
  const labels = all.map((r) => r.label);
  const runs = [];
  for (const want of requested) {
    const matches = all.filter((r) => r.label === want || r.name === want);
    if (matches.length === 0) fail(`unknown allocator '${want}' for --allocators (known: ${labels.join(', ')})`);
    for (const r of matches) {
      if (!runnable(r)) fail(`'${r.label}' needs a CUDA device and this machine has none`);
      if (!runs.includes(r)) runs.push(r);
    }
  }
  return runs;
}

/** Numbers in [0, 1) from the seed (xorshift32). */
function rng(seed) {
  const next = xorshift32((seed * 2654435761) >>> 0 || 1);
  return () => next() / 2 ** 32;
}

/**
 * Request sizes, like a training run's: 85% small (512 B - 64 KiB), 14% MiB-sized (64 KiB - 8 MiB),
 * 1% large (8 - 128 MiB); log-uniform within each band, not rounded. A table of 2^20 drawn once.
 */
function sizeTable(rand) {
  const table = new Float64Array(2 ** 20);
  const logUniform = (lo, hi) => Math.floor(Math.exp(Math.log(lo) + rand() * (Math.log(hi) - Math.log(lo))));
  for (let i = 0; i < table.length; i++) {
    const r = rand();
    table[i] = r < 0.85 ? logUniform(512, 64 * KiB) : r < 0.99 ? logUniform(64 * KiB, 8 * MiB) : logUniform(8 * MiB, 128 * MiB);
  }
  return table;
}

/** Runs `ops` operations on one allocator; returns the row of the report. */
function soak(run, ops, args, sizes) {
  const rand = rng(args.seed + 17);
  const allocator = createAllocator(run.name, run.options);
  const streams = Array.from({ length: args.streams }, () => Stream.create(allocator.device));
  let liveCap = args.liveBytes;
  if (allocator.device.kind === 'cuda') liveCap = Math.min(liveCap, Math.floor(memoryInfo(allocator.device.index).freeBytes / 4));
  const window = args.window;
  const ptrs = new Float64Array(window);
  const bytes = new Float64Array(window);
  const streamOf = new Uint8Array(window);
  let live = 0;
  let liveBytes = 0;
  let peakLive = 0;
  let mallocs = 0;
  let frees = 0;
  let crossStreamFrees = 0;
  let ooms = 0;
  let next = 0;
  const every = Math.max(1, Math.floor(ops / args.samples));
  const samples = [];

  const free = (i, otherStream) => {
    const s = otherStream ? streams[Math.floor(rand() * streams.length)] : streams[streamOf[i]];
    if (s !== streams[streamOf[i]]) {
      allocator.recordStream(ptrs[i], streams[streamOf[i]]); // used there; freed here
      crossStreamFrees++;
    }
    allocator.free(ptrs[i], bytes[i], s);
    liveBytes -= bytes[i];
    live--;
    ptrs[i] = ptrs[live];
    bytes[i] = bytes[live];
    streamOf[i] = streamOf[live];
    frees++;
  };

  const t0 = performance.now();
  for (let op = 0; op < ops; op++) {
    const size = sizes[next & (sizes.length - 1)];
    const mustFree = live === window || liveBytes + size > liveCap;
    // allocate with probability 1 - live/window: the live set settles around half the window
    // within a few thousand operations and then fluctuates around it
    if (live > 0 && (mustFree || rand() < live / window)) {
      free(Math.floor(rand() * live), rand() < 0.2); // random order; one in five on another stream
    } else {
      next++;
      const s = Math.floor(rand() * streams.length);
      try {
        ptrs[live] = allocator.malloc(size, streams[s]);
      } catch (e) {
        if (!(e instanceof OutOfMemoryError)) throw e;
        ooms++;
        continue;
      }
      bytes[live] = size;
      streamOf[live] = s;
      live++;
      liveBytes += size;
      if (liveBytes > peakLive) peakLive = liveBytes;
      mallocs++;
    }
    if ((op + 1) % every === 0) {
      const st = allocator.stats();
      samples.push({
        op: op + 1,
        ms: performance.now() - t0,
        reservedBytes: st.reservedBytes,
        allocatedBytes: st.allocatedBytes,
        liveBytes,
      });
    }
  }
  const ms = performance.now() - t0;
  const drainFrees = live;
  while (live > 0) free(live - 1, false);
  frees -= drainFrees;
  for (const s of streams) s.synchronize();
  const drained = allocator.stats();
  allocator.trim();
  const trimmed = allocator.stats();
  for (const s of streams) s.destroy();
  allocator.dispose();

  const at = (fraction) => samples[Math.max(0, Math.ceil(samples.length * fraction) - 1)]?.reservedBytes ?? 0;
  const half = Math.floor(samples.length / 2);
  const maxOf = (list) => list.reduce((m, s) => Math.max(m, s.reservedBytes), 0);
  const firstHalfMax = maxOf(samples.slice(0, half));
  const secondHalfMax = maxOf(samples.slice(half));
  const growth = firstHalfMax > 0 ? secondHalfMax / firstHalfMax - 1 : 0;
  const problems = [];
  if (secondHalfMax > firstHalfMax * (1 + args.margin)) {
    problems.push(`reserved grew ${(growth * 100).toFixed(1)}% in the second half (margin ${(args.margin * 100).toFixed(0)}%)`);
  }
  if (drained.allocatedBytes !== 0) problems.push(`${drained.allocatedBytes} bytes still allocated after freeing everything`);
  if (drained.allocCount !== drained.freeCount) problems.push(`allocCount ${drained.allocCount} != freeCount ${drained.freeCount}`);
  if (ooms > 0) problems.push(`${ooms} requests failed with out-of-memory`);
  return {
    allocator: run.label,
    strategy: run.name,
    options: run.options,
    ops,
    mallocs,
    frees,
    drainFrees,
    crossStreamFrees,
    ooms,
    wallMs: ms,
    nsPerOp: (ms * 1e6) / ops,
    liveCapBytes: liveCap,
    peakLiveBytes: peakLive,
    reservedAt10: at(0.1),
    reservedAt50: at(0.5),
    reservedAt100: at(1),
    maxReservedFirstHalf: firstHalfMax,
    maxReservedSecondHalf: secondHalfMax,
    maxReserved: Math.max(firstHalfMax, secondHalfMax),
    secondHalfGrowth: growth,
    afterDrain: drained,
    reservedAfterTrim: trimmed.reservedBytes,
    verdict: problems.length === 0 ? 'bounded' : 'NOT bounded',
    problems,
    samples,
  };
}

function fmtNs(ns) {
  return ns >= 1000 ? `${(ns / 1000).toFixed(2)} µs` : `${ns.toFixed(0)} ns`;
}

function printSoakTable(rows, device) {
  const header = ['allocator', 'ops', 'wall', 'per op', 'reserved@10%', '@50%', '@100%', 'max reserved', 'peak live', 'verdict'];
  const table = rows.map((r) => [
    r.allocator,
    r.ops.toLocaleString('en-US'),
    `${(r.wallMs / 1000).toFixed(1)} s`,
    fmtNs(r.nsPerOp),
    formatBytes(r.reservedAt10),
    formatBytes(r.reservedAt50),
    formatBytes(r.reservedAt100),
    formatBytes(r.maxReserved),
    formatBytes(r.peakLiveBytes),
    r.verdict,
  ]);
  console.log(`soak: mixed sizes over streams (${device})`);
  printTable(header, table);
  for (const r of rows) for (const p of r.problems) console.log(`  ${r.allocator}: ${p}`);
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const runs = selectRuns(args.allocators);
  const device = gpu ? deviceProperties(0).name : 'no GPU: host strategies only';
  const sizes = sizeTable(rng(args.seed));
  const rows = [];
  for (const run of runs) {
    let ops = args.ops;
    if (driverPerOp.has(run.name) && args.driverOps < ops) {
      ops = args.driverOps;
      process.stderr.write(
        `${run.label}: ${ops.toLocaleString('en-US')} operations (--driver-ops) instead of ${args.ops.toLocaleString('en-US')}: ` +
          'every malloc and free is a driver call of tens of µs to ms\n',
      );
    }
    process.stderr.write(`soaking ${run.label} (${ops.toLocaleString('en-US')} operations)...\n`);
    rows.push(soak(run, ops, args, sizes));
  }
  printSoakTable(rows, device);
  const date = new Date().toISOString();
  const slug = gpu
    ? deviceProperties(0)
        .name.toLowerCase()
        .replace(/[^a-z0-9]+/g, '-')
        .replace(/^-|-$/g, '')
    : 'host';
  const out = args.out ?? `bench/soak/out/${date.slice(0, 10)}-${slug}.json`;
  const result = {
    benchmark: 'soak',
    date,
    node: process.version,
    gpu: gpu ? deviceProperties(0) : null,
    command: `node bench/soak/run.js ${process.argv.slice(2).join(' ')}`.trim(),
    settings: { ...args, out },
    rows,
  };
  writeJson(out, result);
  process.exitCode = rows.every((r) => r.verdict === 'bounded') ? 0 : 1;
}

main();
