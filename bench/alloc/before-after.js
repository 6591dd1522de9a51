#!/usr/bin/env node
// bench/alloc/before-after: malloc+free pair latency of two builds of the addon in one process.
// Batches alternate between this tree's addon and another tree's (--before DIR), round after round
// and first one then the other, so that what makes one process faster than another (its core, its
// memory layout, the host's load at that minute) falls on both builds alike: separate processes of
// one build differ by more than the 5% a before/after check asks about. Prints a table (each build's
// median, after ÷ before, the spread of the per-round ratios) and writes JSON.
//
//   node bench/alloc/before-after.js --before ../gpumem-old [--specs pool,expandable] [--rounds 15]
//
// Each measurement goes straight to an addon: its native loop (tools.benchPairs, tools.benchTrace)
// and the fast path every native TypeScript allocator calls (Resource.fastPath). The TypeScript
// classes are left out: two copies of @gpumem/allocator-core in one process share one registry
// and one addon by design (process-shared.ts).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { deviceProperties, formatBytes, hasCudaDevice, loadNative } from '@gpumem/allocator-core';
import { parseAllocatorList, spreadOf } from '@gpumem/compare';
import { cliArgs } from '../lib/args.js';
import { mixedTrace } from '../lib/mixed-trace.js';
import { formatNs, printTable, writeJson } from '../lib/output.js';

const gpu = hasCudaDevice();
const defaultSpecs = gpu ? 'pool,expandable' : 'pool:upstream=host,expandable:upstream=host:device=-1';

const usage = `Usage: node bench/alloc/before-after.js --before DIR [--specs LIST] [--rounds N] [--quick] [--out FILE]
  --before DIR   the root of another built tree (its native/build/Release/gpumem.node): the "before";
                 this tree is the "after"
  --specs LIST   comma-separated chains as the addon builds them: STRATEGY[:key=value...] with the
                 strategy's native option names, and device=N for the chain's device
                 (default here: ${defaultSpecs})
  --rounds N     batches per build and measurement, alternating (default 15, at least 2)
  --quick        fewer pairs a batch (a smoke run)
  --out FILE     where to write the JSON (default bench/alloc/out/before-after.json)`;

const { help, fail, integer } = cliArgs(usage, 'bench/alloc/before-after');

function parseArgs(argv) {
  const args = { before: undefined, specs: defaultSpecs, rounds: 15, quick: false, out: 'bench/alloc/out/before-after.json' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--before') args.before = argv[++i];
    else if (a === '--specs') args.specs = argv[++i];
    else if (a === '--rounds') args.rounds = integer(argv[++i], '--rounds', 2);
    else if (a === '--quick') args.quick = true;
    else if (a === '--out') args.out = argv[++i];
    else if (a === '-h' || a === '--help') help();
    else fail(`unknown option '${a}'`);
  }
  if (args.before === undefined) fail('--before DIR is required');
  return args;
}

// NAME[:key=value...] as compare parses it, made into the addon's chain spec.
function chainSpecs(list) {
  let parsed;
  try {
    parsed = parseAllocatorList(list);
  } catch (e) {
    fail(e.message);
  }
  return parsed.map(({ label, name, options }) => {
    const { device, ...rest } = options;
    for (const [key, value] of Object.entries(rest)) {
      if (typeof value === 'object') fail(`'${label}': the addon takes flat options, not '${key}.…'`);
    }
    return { label, chain: { strategy: name, ...(device === undefined ? {} : { device }), options: rest } };
  });
}

function otherAddon(root) {
  const file = path.resolve(root, 'native/build/Release/gpumem.node');
  if (!existsSync(file)) fail(`${root} has no built addon (${file}): build it there (npm ci)`);
  return { root: path.resolve(root), file, addon: createRequire(import.meta.url)(file) };
}

const MiB = 2 ** 20;
const sizes = [256, 64 * 1024, MiB, 64 * MiB];

// One compiled loop per build: a loop shared by both would see two Resource classes and make
// polymorphic calls for both, slower for whichever it did not see first.
const fastPathSource = `return (fast, iterations, now) => {
  const t0 = now();
  for (let i = 0; i < iterations; i++) {
    fast.allocate();
    fast.deallocate();
  }
  return ((now() - t0) * 1e6) / iterations;
};`;

// A build's measurements of one chain: each call times one batch and returns ns per pair.
function measurements(addon, chain, iterations, trace) {
  const resource = new addon.Resource(chain);
  const loop = new Function(fastPathSource)();
  const now = () => performance.now();
  const cells = new Map();
  for (const bytes of sizes) {
    const args = new Float64Array([bytes, 0, 0]);
    const fast = resource.fastPath(args);
    cells.set(`${formatBytes(bytes)} native`, () => addon.tools.benchPairs(resource, bytes, iterations, 1, 0).medianNsPerPair);
    cells.set(`${formatBytes(bytes)} fast path`, () => loop(fast, iterations, now));
  }
  cells.set('trace native', () => addon.tools.benchTrace(resource, trace, 64, 1, 0).medianNsPerPair);
  return { cells, dispose: () => resource.dispose() };
}

// Both builds' batches of one measurement, alternating which goes first; one warm-up each.
function alternate(after, before, rounds) {
  after();
  before();
  const afterNs = [];
  const beforeNs = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      afterNs.push(after());
      beforeNs.push(before());
    } else {
      beforeNs.push(before());
      afterNs.push(after());
    }
  }
  return { afterNs, beforeNs };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const specs = chainSpecs(args.specs);
  const other = otherAddon(args.before);
  const current = loadNative();
  const iterations = args.quick ? 10_000 : 200_000;
  const trace = mixedTrace(args.quick ? 2000 : 20_000);
  const rows = [];
  for (const { label, chain } of specs) {
    const a = measurements(current, chain, iterations, trace);
    const b = measurements(other.addon, chain, iterations, trace);
    try {
      for (const [measurement, after] of a.cells) {
        const { afterNs, beforeNs } = alternate(after, b.cells.get(measurement), args.rounds);
        const beforeNsPerPair = spreadOf(beforeNs);
        const afterNsPerPair = spreadOf(afterNs);
        rows.push({
          chain: label,
          measurement,
          beforeNsPerPair,
          afterNsPerPair,
          ratio: afterNsPerPair.median / beforeNsPerPair.median,
          roundRatios: spreadOf(afterNs.map((ns, r) => ns / beforeNs[r])),
        });
      }
    } finally {
      a.dispose();
      b.dispose();
    }
    process.stderr.write(`measured ${label}\n`);
  }

  console.log(`malloc+free pair latency, before (${other.root}) and after (this tree), ${args.rounds} alternating batches each`);
  printTable(
    ['chain', 'measurement', 'before', 'after', 'after/before', 'per-round ratio (min–max)'],
    rows.map((r) => [
      r.chain,
      r.measurement,
      formatNs(r.beforeNsPerPair.median),
      formatNs(r.afterNsPerPair.median),
      r.ratio.toFixed(3),
      `${r.roundRatios.min.toFixed(2)}–${r.roundRatios.max.toFixed(2)}`,
    ]),
  );
  const geometricMeanRatio = Math.exp(rows.reduce((s, r) => s + Math.log(r.ratio), 0) / rows.length);
  const within = rows.filter((r) => Math.abs(r.ratio - 1) <= 0.05).length;
  console.log(`\nafter/before: geometric mean ${geometricMeanRatio.toFixed(3)}; ${within} of ${rows.length} measurements within 5%`);
  writeJson(args.out, {
    benchmark: 'alloc-before-after',
    date: new Date().toISOString(),
    node: process.version,
    gpu: gpu ? deviceProperties(0) : null,
    before: other.root,
    rounds: args.rounds,
    pairsPerBatch: iterations,
    traceOperations: trace.length,
    geometricMeanRatio,
    rows,
  });
}

main();
