#!/usr/bin/env node
// bench/multi: the seed GCN (or, with --model mlp, the data-parallel mlp on MNIST) on one device and
// over several ranks, each configuration trained in a fresh process, repeated, interleaved. Per configuration: the plan of the first layer, the median
// epoch (min–max over every measured epoch of every repeat; each run's first epoch is a warm-up and
// left out), the speed-up against the baseline (the first configuration on one device, train() or
// one rank, that computes A·x once: the plan of every run over ranks; rows of another plan get none),
// the largest per-device epoch peak and bytes per node, the largest
// per-device peak of setup (before the first epoch: data and graph), the last loss,
// and for runs over ranks the exchange: bytes all-gathered per epoch, the time in those calls and
// the bandwidth they achieved, against the communicator's own all-gather measured by the same ranks
// before training (at the exchange's size and at --allgather-bytes). Prints a markdown table and
// writes JSON.
//
//   node bench/multi/run.js --config 'NAME|ALLOCATOR|DEVICES[|COMMUNICATOR][|PLAN]' [--config ...] [--nodes N]
//                           [--epochs 4] [--repeats 3] [--allgather-bytes 268435456] [--json FILE]
//                           [--model mlp [--batch-size B] [--cuda-graph]]
//
// The mlp splits every batch into one slice per rank and all-reduces the gradients each step; its
// rows have no plan, bytes per node or per-epoch exchange (the all-reduce is inside the step), and
// its speed-up is against the first configuration on one device (train() or one rank).
//
// DEVICES: '-' for train() on one device (no ranks), a number of ranks, or CUDA ordinals (0,0).
// PLAN, for train() only: 'once' (the default: A·x taken once, (A·x)·W1ᵀ per epoch, as the ranks
// compute it) or 'every-epoch' (A·(x·W1ᵀ) per epoch: gcn-seed's plan, for comparison; no speed-up).
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { median } from '@gpumem/allocator-core';
import { cliArgs } from '../lib/args.js';
import { devicesText, parseDevices as parseDevicesOf } from './configs.js';
import { writeJson } from '../lib/output.js';

const self = fileURLToPath(import.meta.url);
const usage = `Usage: node bench/multi/run.js --config 'NAME|ALLOCATOR|DEVICES[|COMMUNICATOR][|PLAN]' [--config ...] [options]
  --config ...            a label, an allocator (a name, or NAME:key=value... as the CLI takes), '-' (train() on one device) or a number of ranks or
                          CUDA ordinals (e.g. 2, or 0,0), optionally 'nccl' or 'host', and for '-'
                          optionally the first layer's plan: 'once' (default; the ranks' plan) or
                          'every-epoch' (gcn-seed's A·(x·W1ᵀ) every epoch); repeat for more.
                          The speed-up is against the first configuration on one device (train() or
                          one rank) that takes A·x once
  --nodes N               nodes of the random graph, 10 edges each (default 2000000)
  --epochs E              epochs per run, the first left out (default 4)
  --repeats R             runs per configuration, interleaved, each in a fresh process (default 3)
  --allgather-bytes B     also measure the communicator's all-gather at B bytes (default 268435456)
  --timeout S             seconds a run may take (default 600)
  --model M               gcn (default) or mlp (data parallel on MNIST: each batch split over the ranks)
  --batch-size B          the mlp's batch, split over the ranks (default: the mlp's, 64)
  --cuda-graph            the mlp's steps captured into CUDA graphs (the all-reduce inside them)
  --json FILE             where to write the JSON (default bench/multi/out/multi.json)`;

const { help, fail, integer } = cliArgs(usage);
const parseDevices = (text) => parseDevicesOf(text, { fail, integer });

function parseArgs(argv) {
  const args = {
    configs: [],
    nodes: 2_000_000,
    epochs: 4,
    repeats: 3,
    allgatherBytes: 256 * 2 ** 20,
    timeout: 600,
    json: 'bench/multi/out/multi.json',
    model: 'gcn',
    batchSize: undefined,
    cudaGraph: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--config') {
      const [name, allocator, devices, ...rest] = (argv[++i] ?? '').split('|');
      if (!name || !allocator || !devices)
        fail(`Expected NAME|ALLOCATOR|DEVICES[|COMMUNICATOR][|PLAN] for --config but received '${argv[i]}'`);
      const config = { name, allocator, devices: parseDevices(devices), communicator: undefined, inputAggregation: undefined };
      for (const field of rest) {
        if (field === 'nccl' || field === 'host') config.communicator = field;
        else if (field === 'once' || field === 'every-epoch') config.inputAggregation = field;
        else fail(`Expected 'nccl' or 'host' (COMMUNICATOR) or 'once' or 'every-epoch' (PLAN) in --config but received '${field}'`);
      }
      if (config.devices === undefined && config.communicator !== undefined)
        fail(`Expected no COMMUNICATOR with DEVICES '-' (train() on one device) in --config '${argv[i]}'`);
      if (config.devices !== undefined && config.inputAggregation === 'every-epoch')
        fail(`Expected PLAN 'once' (or none) with ranks in --config '${argv[i]}': a run over ranks takes A·x once`);
      args.configs.push(config);
    } else if (a === '--nodes') args.nodes = integer(argv[++i], '--nodes', 1);
    else if (a === '--epochs') args.epochs = integer(argv[++i], '--epochs', 2);
    else if (a === '--repeats') args.repeats = integer(argv[++i], '--repeats', 1);
    else if (a === '--allgather-bytes') args.allgatherBytes = integer(argv[++i], '--allgather-bytes', 4);
    else if (a === '--timeout') args.timeout = integer(argv[++i], '--timeout', 1);
    else if (a === '--json') args.json = argv[++i];
    else if (a === '--model') {
      args.model = argv[++i];
      if (args.model !== 'gcn' && args.model !== 'mlp') fail(`Expected 'gcn' or 'mlp' for --model but received '${args.model}'`);
    } else if (a === '--batch-size') args.batchSize = integer(argv[++i], '--batch-size', 1);
    else if (a === '--cuda-graph') args.cudaGraph = true;
    else if (a === '-h' || a === '--help') help();
    else fail(`Unknown argument '${a}'`);
  }
  if (args.configs.length === 0) fail('Expected at least one --config');
  if (args.model === 'gcn' && (args.batchSize !== undefined || args.cudaGraph))
    fail('Expected --batch-size and --cuda-graph with --model mlp only');
  if (args.model === 'mlp' && args.configs.some((c) => c.inputAggregation !== undefined))
    fail("Expected no PLAN in --config with --model mlp (the plan is the gcn's first layer)");
  return args;
}

/** The worker: one run in this process, its result as JSON to `out`. */
async function worker(request, out) {
  const { builtInStrategyPackages, parseAllocatorSpec } = await import('@gpumem/compare');
  for (const m of builtInStrategyPackages) await import(m);
  const { train, trainDistributed } = await import('@gpumem/gnn');
  const mlp = request.model === 'mlp';
  // ALLOCATOR may carry options, as the command line's specs do: 'pool:limitBytes=64MiB'
  const spec = parseAllocatorSpec(request.allocator);
  const allocator = { allocator: spec.name, ...(Object.keys(spec.options).length > 0 ? { allocatorOptions: spec.options } : {}) };
  const options = mlp
    ? {
        model: 'mlp',
        epochs: request.epochs,
        ...allocator,
        ...(request.batchSize !== undefined ? { batchSize: request.batchSize } : {}),
        ...(request.cudaGraph ? { cudaGraph: true } : {}),
      }
    : { model: 'gcn', dataset: 'random', nodes: request.nodes, epochs: request.epochs, ...allocator };
  let result;
  if (request.devices === undefined)
    result = train({ ...options, ...(request.inputAggregation ? { inputAggregation: request.inputAggregation } : {}) });
  else {
    // the gcn's all-gathers are ranks x ceil(N / ranks) rows of 10 classes: measure NCCL at that size too
    const ranks = Array.isArray(request.devices) ? request.devices.length : request.devices;
    const exchangeBytes = Math.ceil(request.nodes / ranks) * ranks * 10 * 4;
    const measure = request.measureAllGather === false ? [] : mlp ? [request.allgatherBytes] : [exchangeBytes, request.allgatherBytes];
    result = await trainDistributed({
      ...options,
      devices: request.devices,
      ...(request.communicator ? { communicator: request.communicator } : {}),
      imports: [...builtInStrategyPackages],
      measureAllGather: measure,
    });
  }
  writeFileSync(out, JSON.stringify(result));
}

const GiB = 2 ** 30;

function runOnce(args, config) {
  const out = join(tmpdir(), `gpumem-multi-${process.pid}-${Date.now()}.json`);
  const request = {
    ...config,
    model: args.model,
    nodes: args.nodes,
    epochs: args.epochs,
    allgatherBytes: args.allgatherBytes,
    batchSize: args.batchSize,
    cudaGraph: args.cudaGraph,
  };
  const t0 = Date.now();
  try {
    execFileSync(process.execPath, [self, '--worker', JSON.stringify(request), out], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: args.timeout * 1000,
    });
    const result = JSON.parse(readFileSync(out, 'utf8'));
    return { ok: true, wallMs: Date.now() - t0, result };
  } catch (e) {
    const stderr = String(e.stderr ?? e.message)
      .trim()
      .split('\n')
      .slice(-3)
      .join(' | ');
    return { ok: false, wallMs: Date.now() - t0, error: stderr };
  } finally {
    rmSync(out, { force: true });
  }
}

/** The first layer's plan of a gcn configuration: train() takes A·x once unless told 'every-epoch'; ranks always do. The mlp's one plan: the batch split over the ranks. */
function planOf(config, model) {
  if (model === 'mlp') return 'batch split';
  return config.inputAggregation === 'every-epoch' ? 'A·(x·W1ᵀ) every epoch' : 'A·x once';
}

/** Ranks of a configuration: 1 for train(). */
function ranksOf(config) {
  return config.devices === undefined ? 1 : Array.isArray(config.devices) ? config.devices.length : config.devices;
}

/** Per run: the measured epochs' times, the peak, and the exchange (runs over ranks). */
function summariseRun(result) {
  const measured = result.epochs.slice(1);
  const ranks = result.ranks ?? [];
  const exchange = ranks.map((r) => {
    const epochs = (r.exchange ?? []).slice(1); // the first epoch also holds the setup's feature all-gather
    const gather = epochs.map((e) => e.allGather ?? { calls: 0, bytes: 0, ms: 0 });
    return { bytes: median(gather.map((g) => g.bytes)), ms: median(gather.map((g) => g.ms)), bench: r.allGatherBench ?? [] };
  });
  return {
    epochMs: measured.map((e) => e.epochMs),
    peakAllocatedBytes: Math.max(...result.epochs.map((e) => e.peakAllocatedBytes)),
    setupPeakAllocatedBytes: result.setupPeakAllocatedBytes ?? NaN,
    loss: result.epochs.at(-1).loss,
    accuracy: result.epochs.at(-1).accuracy,
    ranks: ranks.length,
    exchange,
  };
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const runs = args.configs.map(() => []);
  for (let r = 0; r < args.repeats; r++) {
    for (const [i, config] of args.configs.entries()) {
      process.stderr.write(`repeat ${r + 1}/${args.repeats}: ${config.name}\n`);
      runs[i].push(runOnce(args, config));
    }
  }
  const rows = args.configs.map((config, i) => {
    const ok = runs[i].filter((x) => x.ok).map((x) => summariseRun(x.result));
    const errors = runs[i].filter((x) => !x.ok).map((x) => x.error);
    const times = ok.flatMap((s) => s.epochMs);
    const ex = ok.flatMap((s) => s.exchange);
    const benches = ex.flatMap((e) => e.bench);
    const benchAt = (bytes) => benches.filter((b) => b.bytes === bytes);
    const exchangeBytes = median(ex.map((e) => e.bytes));
    const exchangeMs = median(ex.map((e) => e.ms));
    const ranks = ok[0]?.ranks ?? 0;
    const achieved = ranks > 1 && exchangeMs > 0 ? ((exchangeBytes / (exchangeMs * 1e6)) * (ranks - 1)) / ranks : undefined;
    // the gcn measures NCCL's all-gather at the exchange's size, then at --allgather-bytes; the mlp at the latter only
    const sizes = [...new Set(benches.map((b) => b.bytes))];
    const [exchangeSize, largeSize] = args.model === 'mlp' ? [undefined, sizes[0]] : sizes;
    const busAt = (bytes) => (bytes === undefined ? undefined : median(benchAt(bytes).map((b) => b.busBandwidth)));
    const ncclAtExchange = busAt(exchangeSize);
    const ncclLarge = busAt(largeSize);
    return {
      ...config,
      plan: planOf(config, args.model),
      runs: runs[i].length,
      failed: errors.length,
      errors,
      epochMs: { median: median(times), min: Math.min(...times), max: Math.max(...times), samples: times },
      peakAllocatedBytes: Math.max(...ok.map((s) => s.peakAllocatedBytes)),
      bytesPerNode: args.model === 'gcn' ? Math.max(...ok.map((s) => s.peakAllocatedBytes)) / args.nodes : undefined,
      setupPeakAllocatedBytes: Math.max(...ok.map((s) => s.setupPeakAllocatedBytes)),
      loss: ok.map((s) => s.loss),
      accuracy: ok.map((s) => s.accuracy),
      ranks,
      exchange:
        ranks > 0
          ? {
              bytesPerEpoch: exchangeBytes,
              msPerEpoch: exchangeMs,
              busBandwidthGBs: achieved,
              ncclAllGatherBusGBs: { atExchangeSize: ncclAtExchange, atLarge: ncclLarge, largeBytes: largeSize },
            }
          : undefined,
    };
  });
  // the speed-up's baseline: one device on the plan of the runs over ranks (A·x once), train() or one rank
  const onePlan = args.model === 'mlp' ? 'batch split' : 'A·x once';
  const baseline = rows.find((r) => ranksOf(r) === 1 && r.plan === onePlan && r.failed < r.runs);
  for (const r of rows) {
    r.speedUp = baseline && r.plan === baseline.plan && r.failed < r.runs ? baseline.epochMs.median / r.epochMs.median : undefined;
  }
  const fmt = (x, d = 1) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(d));
  const lines = [
    args.model === 'mlp'
      ? `mlp on MNIST, batch ${args.batchSize ?? 'default'} split over the ranks${args.cudaGraph ? ', steps captured into CUDA graphs' : ''}, ${args.epochs} epochs (first left out), ${args.repeats} repeats`
      : `gcn on random, ${args.nodes.toLocaleString('en-US')} nodes, ${args.epochs} epochs (first left out), ${args.repeats} repeats`,
    '',
    `| config | allocator | devices | first layer | epoch ms, median (min–max) | speed-up vs ${baseline ? `'${baseline.name}'` : 'one device (none ran)'} | epoch peak/device | B/node | setup peak/device | loss | all-gather/epoch | its time | achieved bus GB/s | its own all-gather, bus GB/s (same size / large) |`,
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows
      .map((r) =>
        [
          r.name,
          r.allocator,
          devicesText(r.devices),
          args.model === 'mlp' ? r.plan : r.devices === undefined ? r.plan : `rows split, ${r.plan}`,
          r.failed === r.runs ? `failed: ${r.errors[0]}` : `${fmt(r.epochMs.median)} (${fmt(r.epochMs.min)}–${fmt(r.epochMs.max)})`,
          r.speedUp !== undefined ? `${fmt(r.speedUp, 2)}x` : r.failed < r.runs && baseline ? '- (another plan)' : '-',
          `${fmt(r.peakAllocatedBytes / GiB, 2)} GiB`,
          fmt(r.bytesPerNode, 0),
          `${fmt(r.setupPeakAllocatedBytes / GiB, 2)} GiB`,
          r.loss.map((l) => l.toFixed(4)).join(' '),
          r.exchange && args.model === 'gcn' ? `${fmt(r.exchange.bytesPerEpoch / 2 ** 20, 1)} MiB` : '-',
          r.exchange && args.model === 'gcn' ? `${fmt(r.exchange.msPerEpoch, 2)} ms` : '-',
          args.model === 'gcn' ? fmt(r.exchange?.busBandwidthGBs) : '-',
          r.exchange ? `${fmt(r.exchange.ncclAllGatherBusGBs.atExchangeSize)} / ${fmt(r.exchange.ncclAllGatherBusGBs.atLarge)}` : '-',
        ].join(' | '),
      )
      .map((l) => `| ${l} |`),
  ];
  lines.push(
    '',
    args.model === 'mlp'
      ? baseline
        ? `speed-up: against '${baseline.name}' (one device, the same global batch); the all-reduce is inside each step, not timed apart`
        : 'speed-up: none (no configuration on one device ran)'
      : baseline
        ? `speed-up: against '${baseline.name}' (one device, A·x once, the plan of every run over ranks); rows of another plan get none`
        : 'speed-up: none (no configuration on one device computing A·x once ran)',
  );
  console.log(lines.join('\n'));
  writeJson(args.json, { args, baseline: baseline?.name, rows, runs });
}

if (process.argv[2] === '--worker') await worker(JSON.parse(process.argv[3]), process.argv[4]);
else main();
