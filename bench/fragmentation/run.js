#!/usr/bin/env node
// bench/fragmentation: each fragmentation trace (README.md) replayed through each strategy in the
// native replay loop. Per trace and strategy: peak reserved / peak allocated, the least capacity that
// replays it with no out-of-memory (bisection over limitBytes to 2 MiB), driver calls over one pass
// and ns per call (the median pass, and bounds from the fastest and slowest passes). Prints a table and writes JSON.
//
//   node bench/fragmentation/run.js [--out bench/fragmentation/out/fragmentation.json] [--repeats 5]
//                                  [--allocators pool,expandable,...] [--traces cycle,two-stream,...]
//
// With a GPU: cuda, pool, async and expandable on the device. Without one: host, pool and expandable
// over host memory (expandable's host twin). The traces are regenerated from patterns.js when missing.
import { existsSync } from 'node:fs';
import { formatBytes, hasCudaDevice, hostDevice, cudaDevice } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-pinned';
import { capacityCap, compileTrace, createReplayAllocator, findMinCapacity, readTrace, replayTrace } from '@gpumem/trace';
import { generateTraces } from './generate.js';
import { patterns } from './patterns.js';
import { cliArgs } from '../lib/args.js';
import { writeJson } from '../lib/output.js';

const usage = `Usage: node bench/fragmentation/run.js [--out FILE] [--repeats N] [--allocators a,b] [--traces t1,t2]
  --out FILE         where to write the JSON (default bench/fragmentation/out/fragmentation.json)
  --repeats N        timed passes per trace and strategy (default 5)
  --allocators LIST  strategies (default: cuda,pool,async,expandable with a GPU; host,pool,expandable without)
  --traces LIST      traces (default: ${Object.keys(patterns).join(',')})`;

const { help, fail } = cliArgs(usage);

function parseArgs(argv) {
  const gpu = hasCudaDevice();
  const args = {
    out: 'bench/fragmentation/out/fragmentation.json',
    repeats: 5,
    allocators: gpu ? ['cuda', 'pool', 'async', 'expandable'] : ['host', 'pool', 'expandable'],
    traces: Object.keys(patterns),
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--out') args.out = argv[++i];
    else if (a === '--repeats') args.repeats = Number(argv[++i]);
    else if (a === '--allocators') args.allocators = argv[++i]?.split(',');
    else if (a === '--traces') args.traces = argv[++i]?.split(',');
    else if (a === '-h' || a === '--help') help();
    else fail(`Unknown argument '${a}'`);
  }
  if (!args.out || !Number.isSafeInteger(args.repeats) || args.repeats < 1 || !args.allocators || !args.traces) {
    console.error(usage);
    process.exit(2);
  }
  for (const t of args.traces) {
    if (!(t in patterns)) {
      console.error(`Unknown trace '${t}'; expected one of: ${Object.keys(patterns).join(', ')}`);
      process.exit(2);
    }
  }
  return args;
}

/** The spec of a strategy on this machine: the device where there is a GPU, host memory otherwise. */
function specOf(name, gpu) {
  if (name === 'pool' || name === 'expandable') return { name, options: { upstream: gpu ? 'cuda' : 'host' } };
  return { name, options: {} };
}

function measure(trace, spec, repeats, device) {
  // One pass for the driver calls (the stats count from creation: the pass and its cleanup).
  const once = createReplayAllocator(spec).allocator;
  let calls;
  let result;
  try {
    const pass = replayTrace(trace, once, { repeats: 1 });
    const s = once.stats();
    calls = { driverAllocs: s.upstreamAllocCount, driverFrees: s.upstreamFreeCount, ooms: pass.ooms };
  } finally {
    once.dispose();
  }
  const timed = createReplayAllocator(spec).allocator;
  try {
    result = replayTrace(trace, timed, { repeats });
  } finally {
    timed.dispose();
  }
  const min = findMinCapacity(trace, spec, { capBytes: capacityCap(device), hintBytes: result.peakReservedBytes });
  // ns per call from per-allocation and per-free figures, weighted by how many of each a pass makes.
  const perCall = (nsPerAlloc, nsPerFree) => (nsPerAlloc * result.allocs + nsPerFree * result.frees) / Math.max(1, result.calls);
  return {
    allocator: spec.name,
    options: spec.options,
    peakAllocatedBytes: result.peakAllocatedBytes,
    peakReservedBytes: result.peakReservedBytes,
    // The lowest and highest peak over the timed passes (one value where the replay is deterministic).
    peakReservedRange: result.peakReservedRange,
    reservedOverAllocated: result.peakAllocatedBytes > 0 ? result.peakReservedBytes / result.peakAllocatedBytes : 0,
    // Undefined bytes: even the cap (the GPU's free memory, or the machine's) ran out.
    minCapacityBytes: min.bytes ?? null,
    driverAllocs: calls.driverAllocs,
    driverFrees: calls.driverFrees,
    nsPerCall: perCall(result.nsPerAlloc, result.nsPerFree),
    // Bounds of ns per call: the fastest pass's allocations and frees, and the slowest's.
    nsPerCallRange: [
      perCall(result.nsPerAllocRange[0], result.nsPerFreeRange[0]),
      perCall(result.nsPerAllocRange[1], result.nsPerFreeRange[1]),
    ],
    nsPerAlloc: result.nsPerAlloc,
    nsPerAllocRange: result.nsPerAllocRange,
    nsPerFree: result.nsPerFree,
    nsPerFreeRange: result.nsPerFreeRange,
    ooms: calls.ooms,
  };
}

function pad(s, n) {
  return String(s).padEnd(n);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const gpu = hasCudaDevice();
  const device = gpu ? cudaDevice(0) : hostDevice;
  const dir = new URL('./traces/', import.meta.url).pathname;
  if (args.traces.some((t) => !existsSync(`${dir}${t}.jsonl.gz`))) generateTraces(dir);
  const rows = [];
  console.log(`device: ${gpu ? 'cuda:0' : 'host (no GPU: the host strategies, expandable on its mmap twin)'}\n`);
  const header = `${pad('trace', 15)}${pad('allocator', 12)}${pad('peak alloc', 12)}${pad('peak resv', 12)}${pad('resv/alloc', 11)}${pad('min capacity', 14)}${pad('driver calls', 14)}ns/call (range over passes)`;
  console.log(header);
  console.log('-'.repeat(header.length + 4));
  for (const name of args.traces) {
    const trace = compileTrace(await readTrace(`${dir}${name}.jsonl.gz`));
    for (const allocator of args.allocators) {
      const row = { trace: name, ...measure(trace, specOf(allocator, gpu), args.repeats, device) };
      rows.push(row);
      const min = row.minCapacityBytes === null ? `> ${formatBytes(capacityCap(device))}` : formatBytes(row.minCapacityBytes);
      console.log(
        `${pad(name, 15)}${pad(allocator, 12)}${pad(formatBytes(row.peakAllocatedBytes), 12)}${pad(formatBytes(row.peakReservedBytes), 12)}` +
          `${pad(`${row.reservedOverAllocated.toFixed(2)}x`, 11)}${pad(min, 14)}${pad(`${row.driverAllocs}/${row.driverFrees}`, 14)}${row.nsPerCall.toFixed(0)} (${row.nsPerCallRange.map((ns) => ns.toFixed(0)).join('–')})`,
      );
    }
  }
  writeJson(args.out, { device: gpu ? 'cuda:0' : 'host', repeats: args.repeats, rows });
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
