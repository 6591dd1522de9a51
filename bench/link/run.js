#!/usr/bin/env node
// bench/link: how fast a kernel reaches host memory over the link, against the ways of moving the
// data instead, measured on one GPU in one run (README.md): zero-copy reads and writes of mapped
// pinned memory at several grid sizes, cudaMemcpyAsync H2D and D2H from pinned memory, managed
// memory prefetched and faulted in from the host, and device memory read as the reference. Prints a
// markdown table (median GB/s, min–max, and the zero-copy read against the best H2D copy and against
// managed faulting) and writes JSON with the device and every repetition.
//
//   node bench/link/run.js [--json bench/link/out/link.json] [--bytes 1GiB] [--repetitions 5]
//                          [--blocks-per-sm 2,4,8,16] [--threads 512] [--device 0]
//
// Needs a CUDA device; without one it says why and exits with status 1. Memory is bounded: the
// buffers are at most half the host's MemAvailable and half the device's free memory.
import { deviceStatus, formatBytes, hasCudaDevice, parseSize } from '@gpumem/allocator-core';
import { linkBenchmark } from '@gpumem/allocator-core/tools';
import { printTable, runMain, writeJson } from '../lib/output.js';
import { cliArgs } from '../lib/args.js';

const usage = `Usage: node bench/link/run.js [--json FILE] [--bytes SIZE] [--repetitions N] [--blocks-per-sm LIST] [--threads N] [--device N]
  --json FILE           where to write the JSON (default bench/link/out/link.json)
  --bytes SIZE          bytes moved by each measurement, e.g. 256MiB (default 1GiB; bounded by half the
                        host's available memory and half the device's free memory)
  --repetitions N       timed repetitions of each measurement (default 5)
  --blocks-per-sm LIST  kernel grid sizes in blocks per multiprocessor (default 2,4,8,16)
  --threads N           threads per block (default 512)
  --device N            CUDA device (default 0)`;

const { help, fail } = cliArgs(usage, 'bench/link');

function integer(text, name) {
  const n = Number(text);
  if (text === undefined || !Number.isSafeInteger(n) || n < 0) fail(`expected a non-negative integer for ${name} but received '${text}'`);
  return n;
}

function parseArgs(argv) {
  const args = { json: 'bench/link/out/link.json', bytes: 2 ** 30, repetitions: 5, blocksPerSm: [2, 4, 8, 16], threads: 512, device: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') args.json = argv[++i];
    else if (a === '--bytes') {
      try {
        args.bytes = parseSize(argv[++i] ?? '', '--bytes');
      } catch (e) {
        fail(e.message);
      }
    } else if (a === '--repetitions') args.repetitions = integer(argv[++i], '--repetitions');
    else if (a === '--blocks-per-sm') args.blocksPerSm = (argv[++i] ?? '').split(',').map((s) => integer(s, '--blocks-per-sm'));
    else if (a === '--threads') args.threads = integer(argv[++i], '--threads');
    else if (a === '--device') args.device = integer(argv[++i], '--device');
    else if (a === '-h' || a === '--help') help();
    else fail(`unknown option '${a}'`);
  }
  if (!args.json) fail('--json needs a file');
  return args;
}

const labels = {
  'zero-copy-read': 'zero-copy read (pinned, in place)',
  'zero-copy-write': 'zero-copy write (pinned, in place)',
  'h2d-copy': 'H2D cudaMemcpyAsync (pinned → device)',
  'd2h-copy': 'D2H cudaMemcpyAsync (device → pinned)',
  'managed-prefetch': 'managed prefetch to device (pages on host)',
  'managed-fault-read': 'managed read, faulting in from host',
  'device-read': 'device memory read (reference)',
};

function gb(v) {
  return v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

function ratio(v) {
  return v === undefined ? '-' : `${v.toFixed(2)}x`;
}

/**
 * The two comparisons of each zero-copy read: against the best H2D copy (the fastest way to bring the
 * data over first), and against managed memory faulting in at the same grid size (the best grid when
 * that one is missing).
 */
function withRatios(measurements) {
  const median = (kind) => measurements.filter((m) => m.kind === kind).map((m) => m.medianGbps);
  const bestCopy = Math.max(...median('h2d-copy'));
  const faults = measurements.filter((m) => m.kind === 'managed-fault-read');
  const bestFault = Math.max(...faults.map((m) => m.medianGbps));
  return measurements.map((m) => {
    if (m.kind !== 'zero-copy-read') return { ...m };
    const sameGrid = faults.find((f) => f.blocksPerSm === m.blocksPerSm)?.medianGbps ?? bestFault;
    return {
      ...m,
      vsBestH2dCopy: Number.isFinite(bestCopy) && bestCopy > 0 ? m.medianGbps / bestCopy : undefined,
      vsManagedFaulting: Number.isFinite(sameGrid) && sameGrid > 0 ? m.medianGbps / sameGrid : undefined,
    };
  });
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!hasCudaDevice()) {
    console.error(`bench/link needs a CUDA device: ${deviceStatus()}`);
    process.exit(1);
  }
  const r = linkBenchmark({
    device: args.device,
    bytes: args.bytes,
    repetitions: args.repetitions,
    blocksPerSm: args.blocksPerSm,
    threadsPerBlock: args.threads,
  });
  const rows = withRatios(r.measurements);

  console.log(
    `host link of ${r.deviceName} (cuda:${r.device}, ${r.multiprocessors} SMs): ${formatBytes(r.bytes)} per measurement` +
      `${r.bytes < r.requestedBytes ? ` (asked ${formatBytes(r.requestedBytes)}; bounded by half the host's available ${formatBytes(r.hostAvailableBytes)} and half the device's free ${formatBytes(r.deviceFreeBytes)})` : ''}` +
      `, ${r.repetitions} repetitions, ${r.threadsPerBlock} threads per block; GB/s = 10^9 bytes/s\n`,
  );
  const header = [
    'measurement',
    'grid',
    'median GB/s',
    'min–max GB/s',
    'zero-copy read / best H2D copy',
    'zero-copy read / managed faulting',
  ];
  const table = rows.map((m) => [
    labels[m.kind] ?? m.kind,
    m.grid > 0 ? `${m.blocksPerSm}/SM (${m.grid} blocks)` : '-',
    gb(m.medianGbps),
    `${gb(m.minGbps)}–${gb(m.maxGbps)}`,
    ratio(m.vsBestH2dCopy),
    ratio(m.vsManagedFaulting),
  ]);
  printTable(header, table);
  for (const reason of r.skipped) console.log(`\nnot measured: ${reason}`);
  const reads = rows.filter((m) => m.kind === 'zero-copy-read');
  if (reads.length > 0) {
    const best = reads.reduce((a, b) => (b.medianGbps > a.medianGbps ? b : a));
    console.log(
      `\nbest zero-copy read: ${gb(best.medianGbps)} GB/s at ${best.blocksPerSm} blocks/SM` +
        `${best.vsBestH2dCopy === undefined ? '' : `, ${ratio(best.vsBestH2dCopy)} the best H2D copy`}` +
        `${best.vsManagedFaulting === undefined ? '' : `, ${ratio(best.vsManagedFaulting)} managed faulting at that grid`}`,
    );
  }

  const result = {
    benchmark: 'link',
    date: new Date().toISOString(),
    node: process.version,
    device: { index: r.device, name: r.deviceName, multiprocessors: r.multiprocessors },
    options: {
      requestedBytes: r.requestedBytes,
      repetitions: r.repetitions,
      blocksPerSm: args.blocksPerSm,
      threadsPerBlock: r.threadsPerBlock,
    },
    bytes: r.bytes,
    hostAvailableBytes: r.hostAvailableBytes,
    deviceFreeBytes: r.deviceFreeBytes,
    // gbps: every repetition, in order (GB/s = 10^9 bytes per second).
    measurements: rows,
    skipped: r.skipped,
  };
  writeJson(args.json, result);
}

await runMain('bench/link', main);
