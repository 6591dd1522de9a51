#!/usr/bin/env node
// bench/checkpoint: the mlp's peak activation memory and step time under activation checkpointing
// and nano-batching (README.md), against the formula of the notes (Mlp.activationFormula): for each
// configuration (checkpoint off/1/2/4 × nano-batches 1/2/4 by default) a few training steps on the
// allocator given, repeated; per step the peak allocated bytes less what was allocated before the
// step (parameters, gradients, dataset, workspaces, the epoch's order and loss slots). Prints a
// markdown table (config, formula bytes, measured peak activation bytes, their ratio, median step
// time with its min–max over the measured steps of every repeat) and writes JSON.
//
//   node bench/checkpoint/run.js [--json bench/checkpoint/out/checkpoint.json] [--allocator pool]
//                                [--batch 4096] [--hidden-layers 8] [--steps 8] [--repeats 3]
//                                [--checkpoints off,1,2,4] [--nano-batches 1,2,4] [--layer-prefetch]
//
// With a GPU: 'pool' over cudaMalloc, batch 4096, 8 steps. Without one: 'host' and the CPU kernels,
// batch 128, 4 steps (a 4096-row step of this mlp takes the CPU kernels half a minute or more).
import { createAllocator, deviceProperties, formatBytes, hasCudaDevice, median, synchronizeDevice } from '@gpumem/allocator-core';
import '@gpumem/allocator-uvm';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import '@gpumem/allocator-expandable';
import { parseAllocatorSpec } from '@gpumem/compare';
import { Mlp, mlpDefaults, train } from '@gpumem/gnn';
import { printTable, runMain, writeJson } from '../lib/output.js';
import { cliArgs } from '../lib/args.js';

const gpu = hasCudaDevice();
const width = mlpDefaults.features; // every layer's input as wide as the pixels: one X for all of them

const usage = `Usage: node bench/checkpoint/run.js [--json FILE] [--allocator SPEC] [--batch N] [--hidden-layers N] [--steps N]
                                  [--repeats N] [--checkpoints LIST] [--nano-batches LIST] [--layer-prefetch]
  --json FILE          where to write the JSON (default bench/checkpoint/out/checkpoint.json)
  --allocator SPEC     NAME or NAME:key=value[:key=value], as gpumem compare takes (default: ${gpu ? 'pool:upstream=cuda' : 'host'})
  --batch N            rows of a batch (default ${gpu ? 4096 : 128})
  --hidden-layers N    hidden layers of ${width} (default 8: N = 9 layers with the output layer)
  --steps N            training steps per run, the first one a warm-up left out (default ${gpu ? 8 : 4})
  --repeats N          runs of each configuration, each with a fresh allocator (default 3)
  --checkpoints LIST   checkpoint segment lengths, 'off' or 0 for none (default off,1,2,4)
  --nano-batches LIST  nano-batches per batch (default 1,2,4)
  --layer-prefetch     trainer-inserted prefetch in every run (moves memory with uvm)`;

const { help, fail } = cliArgs(usage, 'bench/checkpoint');

function integer(text, name, min) {
  const n = Number(text);
  if (text === undefined || !Number.isSafeInteger(n) || n < min)
    fail(`expected an integer of at least ${min} for ${name} but received '${text}'`);
  return n;
}

function list(text, name, min) {
  if (!text) fail(`${name} needs a comma-separated list`);
  return text.split(',').map((s) => (s === 'off' ? 0 : integer(s, name, min)));
}

function parseArgs(argv) {
  const args = {
    json: 'bench/checkpoint/out/checkpoint.json',
    allocator: gpu ? 'pool:upstream=cuda' : 'host',
    batch: gpu ? 4096 : 128,
    hiddenLayers: 8,
    steps: gpu ? 8 : 4,
    repeats: 3,
    checkpoints: [0, 1, 2, 4],
    nanoBatches: [1, 2, 4],
    layerPrefetch: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') args.json = argv[++i];
    else if (a === '--allocator') args.allocator = argv[++i];
    else if (a === '--batch') args.batch = integer(argv[++i], '--batch', 1);
    else if (a === '--hidden-layers') args.hiddenLayers = integer(argv[++i], '--hidden-layers', 0);
    else if (a === '--steps') args.steps = integer(argv[++i], '--steps', 2);
    else if (a === '--repeats') args.repeats = integer(argv[++i], '--repeats', 1);
    else if (a === '--checkpoints') args.checkpoints = list(argv[++i], '--checkpoints', 0);
    else if (a === '--nano-batches') args.nanoBatches = list(argv[++i], '--nano-batches', 1);
    else if (a === '--layer-prefetch') args.layerPrefetch = true;
    else if (a === '-h' || a === '--help') help();
    else fail(`unknown option '${a}'`);
  }
  if (!args.json) fail('--json needs a file');
  if (!args.allocator) fail('--allocator needs a spec');
  const layers = args.hiddenLayers + 1;
  for (const m of args.checkpoints) if (m > layers) fail(`a checkpoint of at most ${layers} (the layers) but received ${m}`);
  for (const k of args.nanoBatches) if (k > args.batch) fail(`nano-batches of at most the batch (${args.batch}) but received ${k}`);
  if (args.steps * args.batch > 60_000)
    fail(`--steps × --batch of at most 60000 (the MNIST training images) but received ${args.steps * args.batch}`);
  try {
    args.spec = parseAllocatorSpec(args.allocator);
  } catch (e) {
    fail(`--allocator: ${e.message}`);
  }
  return args;
}

/** One run: the per-step activation peaks and step times (synchronised) after the warm-up step, and the losses. */
function run(args, checkpoint, nanoBatches) {
  const allocator = createAllocator(args.spec.name, args.spec.options);
  try {
    const peaks = [];
    const stepMs = [];
    let before = 0;
    let t = 0;
    const result = train({
      model: 'mlp',
      allocator,
      hidden: width,
      hiddenLayers: args.hiddenLayers,
      batchSize: args.batch,
      trainSubset: args.steps * args.batch,
      testSubset: 100,
      epochs: 1,
      seed: 0,
      checkpoint,
      nanoBatches,
      layerPrefetch: args.layerPrefetch,
      onStep: (s, stats) => {
        synchronizeDevice(allocator.device); // the step's kernels are done: its time is whole
        const now = performance.now();
        if (s > 0) {
          peaks.push(stats.peakAllocatedBytes - before);
          stepMs.push(now - t);
        }
        before = allocator.stats().allocatedBytes; // the next step starts from here (a step frees all it allocates)
        allocator.resetPeak();
        t = performance.now();
      },
    });
    return { peaks, stepMs, losses: result.epochs[0].losses };
  } finally {
    allocator.dispose();
  }
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const device = gpu ? `${deviceProperties(0).name} (cuda:0)` : 'host (CPU kernels)';
  const layers = args.hiddenLayers + 1;
  console.log(
    `mlp on MNIST, ${args.hiddenLayers} hidden layers of ${width} (N = ${layers} layers), batch ${args.batch}, ${args.steps} steps a run (the first left out), ` +
      `${args.repeats} repeat${args.repeats === 1 ? '' : 's'}, allocator ${args.allocator}${args.layerPrefetch ? ', layer prefetch' : ''}, on ${device}`,
  );
  console.log(
    `X = rows·${width}·4 bytes (a layer's input), Y = 0 (bias add and ReLU in place); formula = the notes' + 2X (backward's dy and dx)\n`,
  );
  const configs = args.checkpoints.flatMap((checkpoint) => args.nanoBatches.map((nanoBatches) => ({ checkpoint, nanoBatches })));
  const rows = [];
  // repeats interleaved (A B C A B C ...), so drift of the machine spreads over every configuration
  const runs = configs.map(() => []);
  for (let r = 0; r < args.repeats; r++) {
    configs.forEach(({ checkpoint, nanoBatches }, i) => {
      process.stderr.write(`[${r + 1}/${args.repeats}] checkpoint ${checkpoint || 'off'}, nano-batches ${nanoBatches} ...\n`);
      runs[i].push(run(args, checkpoint, nanoBatches));
    });
  }
  configs.forEach(({ checkpoint, nanoBatches }, i) => {
    const f = Mlp.activationFormula({ rows: Math.ceil(args.batch / nanoBatches), width, layers, checkpoint });
    const peaks = runs[i].flatMap((x) => x.peaks);
    const stepMs = runs[i].flatMap((x) => x.stepMs);
    const measured = Math.max(...peaks);
    rows.push({
      checkpoint,
      nanoBatches,
      X: f.X,
      Y: f.Y,
      notesBytes: f.notes,
      constantBytes: f.constant,
      formulaBytes: f.total,
      measuredBytes: measured,
      measuredMinBytes: Math.min(...peaks),
      ratio: measured / f.total,
      medianStepMs: median(stepMs),
      minStepMs: Math.min(...stepMs),
      maxStepMs: Math.max(...stepMs),
      stepMs: runs[i].map((x) => x.stepMs),
      losses: runs[i][0].losses,
    });
  });
  const header = ['config', 'formula', 'measured peak activations', 'measured / formula', 'median step (min–max)'];
  const table = rows.map((r) => [
    `checkpoint ${r.checkpoint || 'off'}, nano-batches ${r.nanoBatches}`,
    `${formatBytes(r.formulaBytes)} (${r.formulaBytes})`,
    `${formatBytes(r.measuredBytes)} (${r.measuredBytes})`,
    r.ratio.toFixed(3),
    `${r.medianStepMs.toFixed(2)} ms (${r.minStepMs.toFixed(2)}–${r.maxStepMs.toFixed(2)})`,
  ]);
  printTable(header, table);
  const base = rows.find((r) => r.checkpoint === 0 && r.nanoBatches === 1);
  const differing = base ? rows.filter((r) => r.losses.some((l, s) => Math.abs(l - base.losses[s]) > 1e-5 * Math.abs(base.losses[s]))) : [];
  if (differing.length > 0)
    console.log(
      `\nlosses differ from checkpoint off, nano-batches 1 beyond 1e-5 relative: ${differing.map((r) => `checkpoint ${r.checkpoint || 'off'}/nano ${r.nanoBatches}`).join(', ')}`,
    );

  const result = {
    benchmark: 'checkpoint',
    date: new Date().toISOString(),
    node: process.version,
    device,
    options: {
      allocator: args.allocator,
      batch: args.batch,
      hiddenLayers: args.hiddenLayers,
      width,
      steps: args.steps,
      repeats: args.repeats,
      layerPrefetch: args.layerPrefetch,
    },
    // per configuration: the formula's parts, the largest (and smallest) measured step peak, the step
    // times of every repeat (ms, after its warm-up step) and the first repeat's losses
    rows,
  };
  writeJson(args.json, result);
}

await runMain('bench/checkpoint', main);
