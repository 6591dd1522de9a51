#!/usr/bin/env node
// bench/record: what recording allocation events (the memory timeline of `gpumem compare`) costs.
//
//   node bench/record/run.js [--allocators pool,async] [--epochs N] [--repeats N] [--out FILE]
//
// Trains mlp-seed (MNIST, 4x784, batch 64, one epoch = 938 steps + validation) on each allocator
// with recording on and off, alternating, `repeats` times each; the epoch time is the median over
// every epoch after the first of every repeat. Overhead = on / off - 1. Without a GPU it uses the
// host strategies on a subset of MNIST with the CPU kernels.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { deviceProperties, hasCudaDevice } from '@gpumem/allocator-core';
import '@gpumem/allocator-uvm';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import { runOne, parseAllocatorList } from '@gpumem/gnn';

const usage = 'Usage: node bench/record/run.js [--allocators pool,async] [--epochs N] [--repeats N] [--out FILE]';
const gpu = hasCudaDevice();

function parseArgs(argv) {
  const a = { allocators: gpu ? 'pool,async' : 'pool', epochs: 3, repeats: 3, out: 'bench/record/out/record.json' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--allocators' && v) a.allocators = argv[++i];
    else if (k === '--epochs' && Number.isSafeInteger(Number(v)) && Number(v) >= 2) a.epochs = Number(argv[++i]);
    else if (k === '--repeats' && Number.isSafeInteger(Number(v)) && Number(v) >= 1) a.repeats = Number(argv[++i]);
    else if (k === '--out' && v) a.out = argv[++i];
    else if (k === '-h' || k === '--help') {
      console.log(usage);
      process.exit(0);
    } else {
      console.error(`bench/record: bad or unknown option '${k}' (--epochs needs at least 2)\n${usage}`);
      process.exit(2);
    }
  }
  return a;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function main() {
  const args = parseArgs(process.argv.slice(2));
  const train = { model: 'mlp', epochs: args.epochs, seed: 0, ...(gpu ? {} : { trainSubset: 2048, testSubset: 1000 }) };
  const rows = [];
  for (const spec of parseAllocatorList(args.allocators)) {
    const times = { on: [], off: [] };
    let events = 0;
    let dropped = 0;
    for (let r = 0; r < args.repeats; r++) {
      for (const record of r % 2 ? [true, false] : [false, true]) {
        const run = runOne({ spec, train, record, trackingCapacity: 2 ** 22, timelinePoints: 4000 });
        if (run.status !== 'ok') throw new Error(`${spec.label}: ${run.status}: ${run.error}`);
        times[record ? 'on' : 'off'].push(...run.epochs.slice(1).map((e) => e.epochMs));
        if (record) {
          events = run.eventsRecorded;
          dropped = run.eventsDropped;
        }
      }
    }
    const on = median(times.on);
    const off = median(times.off);
    rows.push({ allocator: spec.label, epochMsOff: off, epochMsOn: on, overheadPercent: (on / off - 1) * 100, eventsPerRun: events, dropped, samplesOff: times.off, samplesOn: times.on });
  }
  const device = gpu ? deviceProperties(0).name : 'host (CPU kernels)';
  console.log(`recording overhead on mlp-seed, ${device}, ${args.repeats} repeats x ${args.epochs} epochs (median of epochs after the first)`);
  console.table(
    rows.map((r) => ({
      allocator: r.allocator,
      'epoch, recording off': `${r.epochMsOff.toFixed(1)} ms`,
      'epoch, recording on': `${r.epochMsOn.toFixed(1)} ms`,
      overhead: `${r.overheadPercent.toFixed(2)}%`,
      'events per run': r.eventsPerRun,
      dropped: r.dropped,
    })),
  );
  mkdirSync(dirname(args.out), { recursive: true });
  writeFileSync(args.out, `${JSON.stringify({ device, date: new Date().toISOString(), args, rows }, null, 2)}\n`);
  console.log(`wrote ${args.out}`);
}

main();
