#!/usr/bin/env node
// bench/alloc: malloc+free pair latency per strategy, through the TypeScript interface and in a
// native loop, at fixed sizes and over a mixed-size trace. Prints a table and writes JSON.
//
//   node bench/alloc/run.js [--out bench/alloc/out/alloc.json] [--quick] [--allocators pool,async,...]
//
// On a machine without a GPU only the host strategies run. Strategies that cannot be made without
// options ('plugin' needs its library) are left out with a note. Medians over repeated batches,
// with the spread of the batches (min, quartiles, max) in the JSON and min–max in the table; each
// batch is timed as a whole (steady clock) and divided by its number of pairs.
import { performance } from 'node:perf_hooks';
import {
  createAllocator,
  deviceProperties,
  formatBytes,
  hasCudaDevice,
  listAllocators,
  NativeAllocator,
  Stream,
} from '@gpumem/allocator-core';
import { benchmarkPairs, benchmarkTrace } from '@gpumem/allocator-core/tools';
import { importStrategies, spreadOf } from '@gpumem/compare';
import { cliArgs } from '../lib/args.js';
import { mixedTrace } from '../lib/mixed-trace.js';
import { formatNs, printTable, writeJson } from '../lib/output.js';

// Every strategy package that ships with gpumem, from the one list the CLI uses too.
await importStrategies();

const usage = `Usage: node bench/alloc/run.js [--out FILE] [--quick] [--allocators a,b,...]
  --out FILE         where to write the JSON (default bench/alloc/out/alloc.json)
  --quick            fewer iterations (a smoke run)
  --allocators LIST  comma-separated registered strategies (default: every one that can run here
                     and needs no options; 'plugin' needs its library and is left out)`;

const { help, fail } = cliArgs(usage);

function parseArgs(argv) {
  const args = { out: 'bench/alloc/out/alloc.json', quick: false, allocators: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--out') args.out = argv[++i];
    else if (a === '--quick') args.quick = true;
    else if (a === '--allocators') args.allocators = argv[++i]?.split(',');
    else if (a === '-h' || a === '--help') help();
    else fail(`bench/alloc: unknown option '${a}'`);
  }
  return args;
}

const MiB = 2 ** 20;
const sizes = [256, 64 * 1024, MiB, 64 * MiB];
const gpu = hasCudaDevice();

// Strategy variants to measure; uvm's managed memory stays small and capped.
const variants = {
  host: [['host', {}]],
  cuda: [['cuda', {}]],
  uvm: [['uvm', { logThresholdBytes: false, limitBytes: 1024 * MiB }]],
  async: [['async', {}]],
  pool: gpu
    ? [
        ['pool', { upstream: 'cuda' }],
        ['pool(host)', { upstream: 'host' }],
      ]
    : [['pool(host)', { upstream: 'host' }]],
};

// iterations per batch: the driver strategies cost tens of microseconds a pair
function iterationsFor(name, quick) {
  const slow = name === 'cuda' || name === 'uvm';
  const n = slow ? 300 : name === 'async' ? 20_000 : 200_000;
  return quick ? Math.max(50, Math.floor(n / 20)) : n;
}

function tsPairs(allocator, bytes, iterations, repeats, stream) {
  for (let i = 0; i < Math.min(iterations, 1000); i++) allocator.free(allocator.malloc(bytes, stream), bytes, stream);
  const samples = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    for (let i = 0; i < iterations; i++) {
      const p = allocator.malloc(bytes, stream);
      allocator.free(p, bytes, stream);
    }
    samples.push(((performance.now() - t0) * 1e6) / iterations);
  }
  return samples;
}

function tsTrace(allocator, trace, window, repeats, stream) {
  const run = () => {
    const live = [];
    for (let i = 0; i < trace.length; i++) {
      if (live.length >= window) {
        const [p, n] = live.shift();
        allocator.free(p, n, stream);
      }
      live.push([allocator.malloc(trace[i], stream), trace[i]]);
    }
    for (const [p, n] of live) allocator.free(p, n, stream);
  };
  run();
  const samples = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    run();
    samples.push(((performance.now() - t0) * 1e6) / trace.length);
  }
  return samples;
}

// A cell: the median, then the fastest and slowest batch.
function cell(spread) {
  if (!spread) return '-';
  return `${formatNs(spread.median)} (${formatNs(spread.min)}–${formatNs(spread.max)})`;
}

// The median and the spread of per-batch figures (ns per pair), as the JSON keeps them.
function figures(samples, key) {
  const spread = samples ? spreadOf(samples) : null;
  return { [`${key}NsPerPair`]: spread?.median, [`${key}Spread`]: spread ?? undefined };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const repeats = args.quick ? 3 : 7;
  const strategies = listAllocators();
  const registered = strategies.map((s) => s.name);
  for (const name of args.allocators ?? []) {
    if (!registered.includes(name)) {
      console.error(`bench/alloc: unknown allocator '${name}' for --allocators (registered: ${registered.join(', ')})`);
      process.exit(2);
    }
  }
  // A strategy that cannot be made without options (e.g. 'plugin': its library) is not measured.
  const needOptions = (args.allocators ?? registered).filter((name) => strategies.find((s) => s.name === name).requiresOptions);
  if (needOptions.length > 0)
    process.stderr.write(
      `bench/alloc: skipping ${needOptions.join(', ')}: needs options (e.g. native's library) that this benchmark does not take\n`,
    );
  const wanted = (args.allocators ?? registered).filter((name) => !needOptions.includes(name));
  const noGpu = wanted.filter((name) => !gpu && strategies.find((s) => s.name === name).requiresCuda);
  if (noGpu.length > 0) process.stderr.write(`bench/alloc: no CUDA device; skipping ${noGpu.join(', ')}\n`);
  const traceSizes = mixedTrace(args.quick ? 2000 : 20_000);
  const window = 64;
  const rows = [];
  for (const name of wanted) {
    if (noGpu.includes(name)) continue;
    for (const [label, options] of variants[name] ?? [[name, {}]]) {
      const allocator = createAllocator(name, options);
      const stream = Stream.create(allocator.device);
      const iterations = iterationsFor(name, args.quick);
      const row = { allocator: label, options, iterations, repeats, sizes: {}, trace: {} };
      try {
        for (const bytes of sizes) {
          const native =
            allocator instanceof NativeAllocator ? benchmarkPairs(allocator, bytes, iterations, repeats, stream).batchNsPerPair : undefined;
          const ts = tsPairs(allocator, bytes, iterations, repeats, stream);
          row.sizes[bytes] = { ...figures(native, 'native'), ...figures(ts, 'typescript') };
        }
        const traceIters = name === 'cuda' || name === 'uvm' ? traceSizes.subarray(0, 500) : traceSizes;
        const nativeTrace =
          allocator instanceof NativeAllocator ? benchmarkTrace(allocator, traceIters, window, repeats, stream).batchNsPerPair : undefined;
        row.trace = {
          operations: traceIters.length,
          window,
          ...figures(nativeTrace, 'native'),
          ...figures(tsTrace(allocator, traceIters, window, repeats, stream), 'typescript'),
        };
        row.stats = allocator.stats();
      } finally {
        stream.synchronize();
        stream.destroy();
        allocator.dispose();
      }
      rows.push(row);
      process.stderr.write(`measured ${label}\n`);
    }
  }

  const header = ['allocator', ...sizes.flatMap((s) => [`${formatBytes(s)} native`, `${formatBytes(s)} TS`]), 'trace native', 'trace TS'];
  const table = rows.map((r) => [
    r.allocator,
    ...sizes.flatMap((s) => [cell(r.sizes[s].nativeSpread), cell(r.sizes[s].typescriptSpread)]),
    cell(r.trace.nativeSpread),
    cell(r.trace.typescriptSpread),
  ]);
  console.log(
    `malloc+free pair latency, median (fastest–slowest) of ${repeats} batches (${gpu ? deviceProperties(0).name : 'no GPU: host strategies only'})`,
  );
  printTable(header, table);

  const result = {
    benchmark: 'alloc',
    date: new Date().toISOString(),
    node: process.version,
    gpu: gpu ? deviceProperties(0) : null,
    quick: args.quick,
    sizes,
    rows,
  };
  writeJson(args.out, result);
}

main();
