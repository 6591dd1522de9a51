#!/usr/bin/env node
// bench/doctor/twin-peak: does the 'caching' strategy (the twin of PyTorch's CUDACachingAllocator)
// reserve what PyTorch reserved? Each corpus snapshot (bench/traces/*.torch.pickle.gz) is replayed
// through the twin on host memory, with no limit and the settings the snapshot recorded, and its
// peak reserved bytes are compared with the peak PyTorch reserved in the recording
// (trace.pytorch.peakReservedBytes, from the snapshot's segment entries). Goal: within 0.1% on
// every snapshot. The pool strategy (the doctor's earlier model) is replayed beside it for scale.
// Prints a table and writes JSON.
//
//   node bench/doctor/twin-peak.js [--out bench/doctor/results/twin-peak.json] [--traces DIR]
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { formatBytes } from '@gpumem/allocator-core';
import '@gpumem/allocator-caching';
import '@gpumem/allocator-pool';
import { compileTrace, createReplayAllocator, pytorchTwin, readTrace, replayTrace } from '@gpumem/trace';
import { cliArgs } from '../lib/args.js';
import { printTable, writeJson } from '../lib/output.js';

const usage = `Usage: node bench/doctor/twin-peak.js [--out FILE] [--traces DIR]
  --out FILE    where to write the JSON (default bench/doctor/results/twin-peak.json)
  --traces DIR  the folder of *.torch.pickle.gz snapshots (default bench/traces)`;

const goal = 0.001; // within 0.1% of the recorded peak

const { help, fail } = cliArgs(usage);

function parseArgs(argv) {
  const args = { out: 'bench/doctor/results/twin-peak.json', traces: 'bench/traces' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--out') args.out = argv[++i];
    else if (a === '--traces') args.traces = argv[++i];
    else if (a === '-h' || a === '--help') help();
    else fail(`Unknown argument '${a}'`);
  }
  if (!args.out || !args.traces) {
    console.error(usage);
    process.exit(2);
  }
  return args;
}

/** Peak reserved bytes of one pass of `compiled` through `spec` on host memory, with no limit. */
function replayPeak(compiled, spec) {
  const { allocator } = createReplayAllocator({ name: spec.name, options: { ...spec.options, upstream: 'host' } });
  try {
    const r = replayTrace(compiled, allocator, { repeats: 1 });
    return { peakReservedBytes: r.peakReservedBytes, ooms: r.ooms };
  } finally {
    allocator.dispose();
  }
}

const args = parseArgs(process.argv.slice(2));
const files = readdirSync(args.traces)
  .filter((f) => f.endsWith('.torch.pickle.gz'))
  .sort();
if (files.length === 0) {
  console.error(`No *.torch.pickle.gz in ${args.traces}`);
  process.exit(1);
}

const rows = [];
for (const file of files) {
  const trace = await readTrace(join(args.traces, file));
  const recorded = trace.pytorch?.peakReservedBytes;
  const settings = trace.header.snapshot?.allocatorSettings;
  const twin = pytorchTwin(settings);
  const compiled = compileTrace(trace);
  const caching = replayPeak(compiled, twin);
  const pool = replayPeak(compiled, { name: 'pool', options: {} });
  const error = recorded > 0 ? (caching.peakReservedBytes - recorded) / recorded : undefined;
  rows.push({
    trace: file,
    events: trace.events.length,
    streams: compiled.streamIds.length,
    reservedBeforeHistoryBytes: trace.header.snapshot?.reservedBeforeHistoryBytes ?? 0,
    settings: twin.options,
    recordedPeakReservedBytes: recorded,
    cachingPeakReservedBytes: caching.peakReservedBytes,
    cachingOoms: caching.ooms,
    poolPeakReservedBytes: pool.peakReservedBytes,
    relativeError: error,
    withinGoal: error !== undefined && Math.abs(error) <= goal,
  });
}

const pct = (x) => (x === undefined ? '-' : `${(100 * x).toFixed(3)}%`);
const header = ['snapshot', 'events', 'streams', 'recorded peak reserved', 'caching (twin)', 'error', 'pool', 'pool error', 'within 0.1%'];
const table = rows.map((r) => [
  r.trace,
  String(r.events),
  String(r.streams),
  r.recordedPeakReservedBytes > 0 ? formatBytes(r.recordedPeakReservedBytes) : '-',
  formatBytes(r.cachingPeakReservedBytes),
  pct(r.relativeError),
  formatBytes(r.poolPeakReservedBytes),
  pct(r.recordedPeakReservedBytes > 0 ? (r.poolPeakReservedBytes - r.recordedPeakReservedBytes) / r.recordedPeakReservedBytes : undefined),
  r.withinGoal ? 'yes' : 'no',
]);
printTable(header, table);
const all = rows.every((r) => r.withinGoal);
console.log(`\n${all ? 'Every' : 'Not every'} snapshot within ${100 * goal}% of its recorded peak reserved.`);

writeJson(args.out, { bench: 'doctor/twin-peak', date: new Date().toISOString(), goal, allWithinGoal: all, rows });
