#!/usr/bin/env node
// bench/train: the shared workloads on every allocator, as a table and JSON.
//
//   node bench/train/run.js [--workload mlp|gcn|all] [--nodes 2000000] [--epochs N]
//                           [--allocators pool,async,...] [--aggregation spmm|scatter|both] [--out FILE]
//
// mlp-seed: epoch time (training + validation, synchronised), median over epochs after the first,
// and test accuracy. gcn-seed: median epoch time after a warm-up epoch, peak allocated and
// reserved. The PyTorch baselines are separate scripts (bench/baselines/), run in the same session.
import { deviceProperties, formatBytes, hasCudaDevice, listAllocators, median } from '@gpumem/allocator-core';
import '@gpumem/allocator-uvm';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import { train } from '@gpumem/gnn';
import { cliArgs } from '../lib/args.js';
import { printTable, writeJson } from '../lib/output.js';

const usage = `Usage: node bench/train/run.js [--workload mlp|gcn|all] [--nodes N] [--epochs N]
                                [--allocators a,b] [--aggregation spmm|scatter|both] [--out FILE]`;

const { help, fail } = cliArgs(usage);

function parseArgs(argv) {
  const a = {
    workload: 'all',
    nodes: 2_000_000,
    epochs: undefined,
    allocators: undefined,
    aggregation: 'both',
    out: 'bench/train/out/train.json',
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--workload' && ['mlp', 'gcn', 'all'].includes(v)) a.workload = argv[++i];
    else if (k === '--nodes' && Number.isSafeInteger(Number(v))) a.nodes = Number(argv[++i]);
    else if (k === '--epochs' && Number.isSafeInteger(Number(v))) a.epochs = Number(argv[++i]);
    else if (k === '--allocators' && v) a.allocators = argv[++i].split(',');
    else if (k === '--aggregation' && ['spmm', 'scatter', 'both'].includes(v)) a.aggregation = argv[++i];
    else if (k === '--out' && v) a.out = argv[++i];
    else if (k === '-h' || k === '--help') help();
    else fail(`bench/train: bad or unknown option '${k}'`);
  }
  return a;
}

const gpu = hasCudaDevice();
const options = {
  pool: { upstream: gpu ? 'cuda' : 'host' },
  uvm: { logThresholdBytes: false },
};

function main() {
  const args = parseArgs(process.argv.slice(2));
  // Every strategy that can be made without options (not 'plugin': its library); on a GPU host a strategy over
  // host memory would run the CPU kernels, so the GPU allocators only; without one, the host twins.
  const names =
    args.allocators ??
    listAllocators()
      .filter((s) => !s.requiresOptions && (gpu ? !s.hostMemory : !s.requiresCuda))
      .map((s) => s.name);
  const rows = [];
  if (args.workload !== 'gcn') {
    // the pool once more with each step replayed as a captured CUDA Graph
    const runs = [...names.map((name) => [name, false]), ...(gpu && names.includes('pool') ? [['pool', true]] : [])];
    for (const [name, cudaGraph] of runs) {
      const epochs = args.epochs ?? 3;
      const r = train({
        model: 'mlp',
        allocator: name,
        allocatorOptions: options[name] ?? {},
        epochs,
        seed: 0,
        cudaGraph,
        ...(gpu ? {} : { trainSubset: 2000, testSubset: 500 }),
      });
      const times = r.epochs.map((e) => e.epochMs);
      rows.push({
        workload: cudaGraph ? 'mlp-seed (CUDA graph)' : 'mlp-seed',
        allocator: name,
        medianEpochMs: median(times.length > 1 ? times.slice(1) : times),
        firstEpochMs: times[0],
        bestAccuracy: Math.max(...r.epochs.map((e) => e.accuracy)),
        peakAllocatedBytes: Math.max(...r.epochs.map((e) => e.peakAllocatedBytes)),
        peakReservedBytes: Math.max(...r.epochs.map((e) => e.peakReservedBytes)),
        upstreamCalls: r.epochs.reduce((a, e) => a + e.upstreamAllocCalls, 0),
        epochs: r.epochs.map(({ losses, stats, ...rest }) => rest),
      });
      process.stderr.write(`${rows[rows.length - 1].workload} ${name}: ${rows[rows.length - 1].medianEpochMs.toFixed(1)} ms/epoch\n`);
    }
  }
  if (args.workload !== 'mlp') {
    const aggregations = args.aggregation === 'both' ? ['spmm', 'scatter'] : [args.aggregation];
    const nodes = gpu ? args.nodes : Math.min(args.nodes, 20_000);
    for (const aggregation of aggregations) {
      for (const name of names) {
        const epochs = (args.epochs ?? 5) + 1;
        let r;
        try {
          // gcn-seed's plan, A·(x·W1ᵀ) every epoch, as the PyTorch baselines compute it
          const gcnSeed = { nodes, epochs, aggregation, inputAggregation: 'every-epoch', seed: 0 };
          r = train({ model: 'gcn', allocator: name, allocatorOptions: options[name] ?? {}, ...gcnSeed });
        } catch (e) {
          rows.push({ workload: `gcn-seed ${aggregation}`, allocator: name, nodes, error: e.message });
          process.stderr.write(`gcn-seed ${aggregation} ${name}: ${e.message}\n`);
          continue;
        }
        const steady = r.epochs.slice(1);
        rows.push({
          workload: `gcn-seed ${aggregation}`,
          allocator: name,
          nodes,
          medianEpochMs: median(steady.map((e) => e.epochMs)),
          firstEpochMs: r.epochs[0].epochMs,
          peakAllocatedBytes: Math.max(...steady.map((e) => e.peakAllocatedBytes)),
          peakReservedBytes: Math.max(...steady.map((e) => e.peakReservedBytes)),
          upstreamCalls: steady.reduce((a, e) => a + e.upstreamAllocCalls, 0),
          epochs: r.epochs.map(({ losses, stats, ...rest }) => rest),
        });
        process.stderr.write(`gcn-seed ${aggregation} ${name}: ${rows[rows.length - 1].medianEpochMs.toFixed(1)} ms/epoch\n`);
      }
    }
  }
  const header = ['workload', 'allocator', 'median epoch', 'first epoch', 'best acc', 'peak allocated', 'peak reserved', 'upstream calls'];
  const table = rows.map((r) =>
    r.error
      ? [r.workload, r.allocator, `failed: ${r.error.slice(0, 60)}`, '', '', '', '', '']
      : [
          r.workload,
          r.allocator,
          `${r.medianEpochMs.toFixed(1)} ms`,
          `${r.firstEpochMs.toFixed(1)} ms`,
          r.bestAccuracy === undefined ? '-' : `${(r.bestAccuracy * 100).toFixed(2)}%`,
          formatBytes(r.peakAllocatedBytes),
          formatBytes(r.peakReservedBytes),
          String(r.upstreamCalls),
        ],
  );
  console.log(`bench/train on ${gpu ? deviceProperties(0).name : 'the CPU (no GPU): reduced sizes'}`);
  printTable(header, table);
  writeJson(args.out, { benchmark: 'train', date: new Date().toISOString(), gpu: gpu ? deviceProperties(0) : null, rows });
}

main();
