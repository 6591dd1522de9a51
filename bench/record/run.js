#!/usr/bin/env node
// bench/record: what recording allocation events (the memory timeline of `gpumem compare`) costs.
//
//   node bench/record/run.js [--allocators pool,async] [--epochs N] [--runs N] [--out FILE]
//
// Trains mlp-seed (MNIST, 4x784, batch 64, one epoch = 938 steps + validation) on each allocator
// with tracking on, and switches recording off and on at every epoch boundary, so the two modes
// alternate within one run on a warm device (epoch 1, the warm-up, is left out). Runs alternate
// which mode comes first. Overhead = median(on) / median(off) - 1, and the median of the paired
// differences between neighbouring epochs. Without a GPU: the host strategies on a subset of MNIST.
import { createTrackedAllocator, deviceProperties, hasCudaDevice, median } from '@gpumem/allocator-core';
import '@gpumem/allocator-uvm';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import { train } from '@gpumem/gnn';
import { parseAllocatorList } from '@gpumem/compare';
import { cliArgs } from '../lib/args.js';
import { writeJson } from '../lib/output.js';

const usage = 'Usage: node bench/record/run.js [--allocators pool,async] [--epochs N >= 3] [--runs N] [--out FILE]';
const gpu = hasCudaDevice();

const { help, fail } = cliArgs(usage);

function parseArgs(argv) {
  const a = { allocators: gpu ? 'pool,async' : 'pool', epochs: 9, runs: 2, out: 'bench/record/out/record.json' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--allocators' && v) a.allocators = argv[++i];
    else if (k === '--epochs' && Number.isSafeInteger(Number(v)) && Number(v) >= 3) a.epochs = Number(argv[++i]);
    else if (k === '--runs' && Number.isSafeInteger(Number(v)) && Number(v) >= 1) a.runs = Number(argv[++i]);
    else if (k === '--out' && v) a.out = argv[++i];
    else if (k === '-h' || k === '--help') help();
    else fail(`bench/record: bad or unknown option '${k}'`);
  }
  return a;
}

/** One run: recording on in the epochs where `onFor(epoch)` holds, switched at each epoch's first step. */
function oneRun(spec, args, onFirst) {
  const tracked = createTrackedAllocator(spec.name, spec.options, 2 ** 22);
  const onFor = (epoch) => epoch === 0 || (epoch % 2 === 1) === onFirst;
  let current = -1;
  try {
    const result = train({
      model: 'mlp',
      allocator: tracked.allocator,
      epochs: args.epochs,
      seed: 0,
      tagAllocations: tracked.setTag,
      ...(gpu ? {} : { trainSubset: 2048, testSubset: 1000 }),
      onProgress: (p) => {
        if (p.epoch === current) return;
        current = p.epoch;
        tracked.setTrackingEnabled(onFor(p.epoch)); // after the epoch's first step: 1 step in 938 in the previous mode
      },
    });
    const { events, dropped } = tracked.events();
    return { epochs: result.epochs.map((e) => ({ epochMs: e.epochMs, recording: onFor(e.epoch) })), events: events.length, dropped };
  } finally {
    tracked.allocator.dispose();
  }
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const rows = [];
  for (const spec of parseAllocatorList(args.allocators)) {
    const on = [];
    const off = [];
    const paired = [];
    let events = 0;
    let dropped = 0;
    for (let r = 0; r < args.runs; r++) {
      const run = oneRun(spec, args, r % 2 === 0);
      const timed = run.epochs.slice(1);
      for (const e of timed) (e.recording ? on : off).push(e.epochMs);
      for (let i = 0; i + 1 < timed.length; i += 2) {
        const [a, b] = timed[i].recording ? [timed[i], timed[i + 1]] : [timed[i + 1], timed[i]];
        paired.push(a.epochMs / b.epochMs - 1);
      }
      events += run.events;
      dropped += run.dropped;
    }
    const mOn = median(on);
    const mOff = median(off);
    rows.push({
      allocator: spec.label,
      epochMsOff: mOff,
      epochMsOn: mOn,
      overheadPercent: (mOn / mOff - 1) * 100,
      pairedMedianPercent: median(paired) * 100,
      eventsRecorded: events,
      dropped,
      on,
      off,
    });
  }
  const device = gpu ? deviceProperties(0).name : 'host (CPU kernels)';
  console.log(
    `recording overhead on mlp-seed, ${device}: ${args.runs} runs x ${args.epochs} epochs, recording switched every epoch (epoch 1 left out)`,
  );
  console.table(
    rows.map((r) => ({
      allocator: r.allocator,
      'epoch, off (median)': `${r.epochMsOff.toFixed(1)} ms`,
      'epoch, on (median)': `${r.epochMsOn.toFixed(1)} ms`,
      overhead: `${r.overheadPercent.toFixed(2)}%`,
      'paired median': `${r.pairedMedianPercent.toFixed(2)}%`,
      'events recorded': r.eventsRecorded,
      dropped: r.dropped,
    })),
  );
  writeJson(args.out, { device, date: new Date().toISOString(), args, rows });
}

main();
