#!/usr/bin/env node
// bench/multi/largest.js: the largest seed GCN (random graph, 10 edges a node) that trains on one
// device and over ranks, found by trying it. Per configuration, each probe trains N nodes for
// --epochs epochs in a fresh process (run.js's worker, without the all-gather benchmark, so only
// the training holds memory): a first probe at --nodes gives the bytes a node takes on the fullest
// device, the next is the N that fills the device's total at that rate, then N grows or shrinks by
// 10% until one probe fits and one runs out of memory, then bisects until the two are within
// --tolerance of each other. A probe that fails for another reason (a timeout, an error that is not
// out of memory) ends that configuration's search and is reported. Prints a markdown table and
// writes JSON.
//
//   node bench/multi/largest.js --config 'NAME|ALLOCATOR|DEVICES' [--config ...] [--nodes 2000000]
//                               [--epochs 2] [--tolerance 0.02] [--max-probes 12] [--timeout 300] [--json FILE]
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliArgs } from '../lib/args.js';
import { devicesText, parseDevices } from './configs.js';
import { writeJson } from '../lib/output.js';

const runJs = join(dirname(fileURLToPath(import.meta.url)), 'run.js');
const usage = `Usage: node bench/multi/largest.js --config 'NAME|ALLOCATOR|DEVICES' [--config ...] [options]
  --config ...        a label, an allocator name, and '-' (train() on one device) or a number of NCCL
                      ranks or CUDA ordinals (e.g. 4, or 0,1,2,3); repeat for more
  --nodes N           the first probe, whose peak per device gives the next (default 2000000)
  --epochs E          epochs per probe (default 2: the peak of an epoch after the first is reached)
  --tolerance T       stop when the smallest N that failed is within (1 + T) of the largest that fit (default 0.02)
  --max-probes P      probes per configuration at most (default 12)
  --timeout S         seconds a probe may take (default 300)
  --fill F            the second probe aims at this fraction of the device (default 1; the allocator's own
                      overhead and the largest block's fit leave some unused, e.g. 0.79 for pool at 42.5M
                      nodes on an H200: give what one device reached to aim the ranks' search)
  --total BYTES       the device size the second probe aims at (default: the CUDA device's total; give it
                      with a capped allocator, e.g. 'host:limitBytes=…', to try the search without a GPU)
  --json FILE         where to write the JSON (default bench/multi/out/largest.json)`;

const { help, fail, integer } = cliArgs(usage);

function parseArgs(argv) {
  const args = {
    configs: [],
    nodes: 2_000_000,
    epochs: 2,
    tolerance: 0.02,
    maxProbes: 12,
    timeout: 300,
    total: undefined,
    json: 'bench/multi/out/largest.json',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--config') {
      const [name, allocator, devices, ...rest] = (argv[++i] ?? '').split('|');
      if (!name || !allocator || !devices || rest.length > 0)
        fail(`Expected NAME|ALLOCATOR|DEVICES for --config but received '${argv[i]}'`);
      args.configs.push({ name, allocator, devices: parseDevices(devices, { fail, integer }) });
    } else if (a === '--nodes') args.nodes = integer(argv[++i], '--nodes', 1000);
    else if (a === '--epochs') args.epochs = integer(argv[++i], '--epochs', 1);
    else if (a === '--tolerance') {
      args.tolerance = Number(argv[++i]);
      if (!(args.tolerance > 0 && args.tolerance < 1)) fail(`Expected a number between 0 and 1 for --tolerance but received '${argv[i]}'`);
    } else if (a === '--max-probes') args.maxProbes = integer(argv[++i], '--max-probes', 2);
    else if (a === '--timeout') args.timeout = integer(argv[++i], '--timeout', 1);
    else if (a === '--fill') {
      args.fill = Number(argv[++i]);
      if (!(args.fill > 0 && args.fill <= 1)) fail(`Expected a number in (0, 1] for --fill but received '${argv[i]}'`);
    } else if (a === '--total') args.total = integer(argv[++i], '--total', 1);
    else if (a === '--json') args.json = argv[++i];
    else if (a === '-h' || a === '--help') help();
    else fail(`Unknown argument '${a}'`);
  }
  if (args.configs.length === 0) fail('Expected at least one --config');
  return args;
}

const outOfMemory = /out of memory|OutOfMemory|InsufficientMemory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation/i;

/** One probe: N nodes trained in a fresh process; fits, out of memory, or another failure. */
function probe(args, config, nodes) {
  const out = join(tmpdir(), `gpumem-largest-${process.pid}-${Date.now()}.json`);
  const request = { ...config, model: 'gcn', nodes, epochs: args.epochs, measureAllGather: false };
  const t0 = Date.now();
  try {
    execFileSync(process.execPath, [runJs, '--worker', JSON.stringify(request), out], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: args.timeout * 1000,
      maxBuffer: 64 * 2 ** 20,
    });
    const result = JSON.parse(readFileSync(out, 'utf8'));
    const ranks = result.ranks ?? [];
    // per device: a run over ranks reports each rank's epochs; train() its own
    const peaks = ranks.length > 0 ? ranks.map((r) => peakOf(r.epochs ?? [])) : [peakOf(result.epochs)];
    return {
      nodes,
      outcome: 'fits',
      seconds: (Date.now() - t0) / 1000,
      peakPerDevice: Math.max(...peaks, peakOf(result.epochs), result.setupPeakAllocatedBytes ?? 0),
      setupPeak: result.setupPeakAllocatedBytes,
      loss: result.epochs.at(-1)?.loss,
    };
  } catch (e) {
    const text = String(e.stderr ?? e.message);
    const timedOut = e.code === 'ETIMEDOUT' || e.signal === 'SIGTERM';
    // the error's own lines, not its stack or Node's banner
    const lastLines = text
      .split('\n')
      .filter((l) => l.trim() !== '' && !/^\s+at |^Node\.js v|^file:\/\/|^\s*\^+\s*$/.test(l))
      .slice(-3)
      .join(' | ')
      .slice(0, 600);
    return {
      nodes,
      outcome: timedOut ? 'timeout' : outOfMemory.test(text) ? 'out of memory' : 'error',
      seconds: (Date.now() - t0) / 1000,
      error: lastLines,
    };
  } finally {
    rmSync(out, { force: true });
  }
}

function peakOf(epochs) {
  return Math.max(0, ...epochs.map((e) => e.peakAllocatedBytes ?? 0));
}

/** N rounded to a readable figure: 3 significant digits. */
function round(n) {
  const unit = 10 ** Math.max(0, Math.floor(Math.log10(n)) - 2);
  return Math.max(1000, Math.round(n / unit) * unit);
}

async function deviceTotalBytes(devices) {
  const { memoryInfo } = await import('@gpumem/allocator-core');
  const ordinal = Array.isArray(devices) ? devices[0] : 0;
  return memoryInfo(ordinal).totalBytes;
}

async function search(args, config) {
  const probes = [];
  const log = (p) => {
    probes.push(p);
    process.stderr.write(`${config.name}: ${p.nodes.toLocaleString('en-US')} nodes: ${p.outcome} (${p.seconds.toFixed(1)} s)\n`);
    return p;
  };
  const first = log(probe(args, config, args.nodes));
  if (first.outcome !== 'fits') return { probes, stopped: `the first probe: ${first.outcome}` };
  const total = args.total ?? (await deviceTotalBytes(config.devices));
  let fit = first.nodes;
  let failed;
  let next = round((args.nodes * total * args.fill) / first.peakPerDevice);
  while (probes.length < args.maxProbes) {
    if (failed !== undefined && failed / fit <= 1 + args.tolerance) break;
    const p = log(probe(args, config, next));
    if (p.outcome === 'fits') fit = Math.max(fit, p.nodes);
    else if (p.outcome === 'out of memory') failed = failed === undefined ? p.nodes : Math.min(failed, p.nodes);
    else return { probes, stopped: `${p.outcome} at ${p.nodes}`, total };
    if (failed === undefined) next = round(fit * 1.1);
    else if (fit === first.nodes) next = round(failed * 0.9);
    else next = round((fit + failed) / 2);
    if (next <= fit || (failed !== undefined && next >= failed)) break;
  }
  return { probes, total };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const rows = [];
  for (const config of args.configs) {
    const { probes, stopped, total } = await search(args, config);
    const fits = probes.filter((p) => p.outcome === 'fits');
    const largest = fits.reduce((a, b) => (b.nodes > a.nodes ? b : a), fits[0]);
    const oom = probes.filter((p) => p.outcome === 'out of memory' && p.nodes > (largest?.nodes ?? 0));
    const smallestFailed = oom.reduce((a, b) => (a === undefined || b.nodes < a.nodes ? b : a), undefined);
    rows.push({ ...config, deviceTotalBytes: total, largest, smallestFailed, stopped, probes });
  }
  const one = rows.find((r) => r.devices === undefined || r.devices === 1 || (Array.isArray(r.devices) && r.devices.length === 1));
  const GiB = 2 ** 30;
  const lines = [
    `the largest gcn on random (10 edges a node) that trains ${args.epochs} epochs, by probing; tolerance ${args.tolerance}`,
    '',
    `| config | allocator | devices | largest N that fit | its peak per device | smallest N out of memory | against '${one?.name ?? 'one device'}' | probes |`,
    '|---|---|---|---|---|---|---|---|',
    ...rows
      .map((r) =>
        [
          r.name,
          r.allocator,
          devicesText(r.devices),
          r.largest ? r.largest.nodes.toLocaleString('en-US') : '-',
          r.largest
            ? `${(r.largest.peakPerDevice / GiB).toFixed(2)} GiB of ${r.deviceTotalBytes ? (r.deviceTotalBytes / GiB).toFixed(2) : '?'}`
            : '-',
          r.smallestFailed ? r.smallestFailed.nodes.toLocaleString('en-US') : r.stopped ? `- (${r.stopped})` : '-',
          one?.largest && r.largest ? `${(r.largest.nodes / one.largest.nodes).toFixed(2)}x` : '-',
          String(r.probes.length),
        ].join(' | '),
      )
      .map((l) => `| ${l} |`),
  ];
  console.log(lines.join('\n'));
  writeJson(args.json, { args, rows });
}

await main();
