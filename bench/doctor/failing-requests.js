#!/usr/bin/env node
// bench/doctor/failing-requests: how long `gpumem doctor` takes on a trace whose requests all fail
// at the capacity (30 MiB held, then N requests of 4 MiB, each freed at once, at a 32 MiB capacity).
// Every replay that only decides "fits or not" stops at its first out-of-memory, so the time grows
// with the trace's length, not with its failures. Prints a table and writes JSON.
//
//   node bench/doctor/failing-requests.js [--out bench/doctor/out/failing-requests.json] [--counts 10000,100000,1000000]
import { performance } from 'node:perf_hooks';
import { formatTable, importStrategies } from '@gpumem/compare';
import { compileTrace, createReplayAllocator, diagnoseOom, replayTrace } from '@gpumem/trace';
import { cliArgs } from '../lib/args.js';
import { writeJson } from '../lib/output.js';

await importStrategies();

const usage = `Usage: node bench/doctor/failing-requests.js [--out FILE] [--counts N,N,...]
  --out FILE     where to write the JSON (default bench/doctor/out/failing-requests.json)
  --counts LIST  the numbers of failing requests (default 10000,100000,1000000)
  --help         this text`;
const { help, fail, integer } = cliArgs(usage);
let out = 'bench/doctor/out/failing-requests.json';
let counts = [10_000, 100_000, 1_000_000];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--help' || argv[i] === '-h') help();
  else if (argv[i] === '--out' && argv[i + 1] !== undefined) out = argv[++i];
  else if (argv[i] === '--counts' && argv[i + 1] !== undefined) counts = argv[++i].split(',').map((c) => integer(c, '--counts', 1));
  else fail(`Unknown argument '${argv[i]}'`);
}

const MiB = 1024 * 1024;
const strategies = [
  { label: 'pool', name: 'pool' },
  { label: 'expandable', name: 'expandable' },
];

/** 30 MiB held, then `n` requests of 4 MiB allocated and freed: at 32 MiB every one fails. */
function failingTrace(n) {
  const events = [{ timeNs: 1, action: 'alloc', ptr: 1, bytes: 30 * MiB, stream: 0, tag: 0 }];
  for (let i = 0; i < n; i++) {
    events.push({ timeNs: 2 + 2 * i, action: 'alloc', ptr: 2 + i, bytes: 4 * MiB, stream: 0, tag: 0 });
    events.push({ timeNs: 3 + 2 * i, action: 'free', ptr: 2 + i, bytes: 4 * MiB, stream: 0, tag: 0 });
  }
  return { header: { source: 'bench' }, events };
}

/** One replay of `trace` through the pool's twin at 32 MiB counting every failure: the cost of one. */
function perFailureUs(trace) {
  const { allocator } = createReplayAllocator(
    { name: 'pool', options: { upstream: 'host' } },
    { capacityBytes: 32 * MiB, addressOnly: true },
  );
  try {
    const started = performance.now();
    const r = replayTrace(compileTrace(trace), allocator, { repeats: 1 });
    return ((performance.now() - started) * 1000) / Math.max(1, r.ooms);
  } finally {
    allocator.dispose();
  }
}

const rows = [];
for (const n of counts) {
  const trace = failingTrace(n);
  const started = performance.now();
  const v = diagnoseOom(trace, {
    capacityBytes: 32 * MiB,
    strategies,
    hostTwins: true,
    outside: { lowBytes: 0, highBytes: 0, source: 'bench' },
  });
  const seconds = (performance.now() - started) / 1000;
  const probes = v.strategies.reduce((sum, s) => sum + (s.minCapacity?.probes ?? 0), 0);
  rows.push({ failingRequests: n, doctorSeconds: seconds, verdict: v.kind, probes, usPerCountedFailure: perFailureUs(trace) });
}

console.log(
  formatTable(
    ['failing requests', 'doctor (s)', 'verdict', 'probes', 'us per failure, counted'],
    rows.map((r) => [String(r.failingRequests), r.doctorSeconds.toFixed(2), r.verdict, String(r.probes), r.usPerCountedFailure.toFixed(2)]),
  ),
);
console.log(
  '\nA replay that counted every failure would take (failing requests x us per failure) per probe; the doctor stops each at the first.',
);
writeJson(out, { date: new Date().toISOString(), capacityBytes: 32 * MiB, rows });
