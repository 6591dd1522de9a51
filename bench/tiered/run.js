#!/usr/bin/env node
// bench/tiered: the seed GCN under memory plans and placements, each configuration trained in a
// fresh process (`gpumem train --json`), repeated, interleaved. Per configuration: the median epoch
// (with min–max over every measured epoch of every repeat; each run's first epoch is a warm-up and
// left out), peak allocated split into device and host bytes, the bytes moved between tiers, the
// bytes the kernels read from host memory per epoch where only the graph lives there (counted from
// the op schedule, README.md), loss and accuracy. Prints a markdown table and writes JSON.
//
//   node bench/tiered/run.js --config 'NAME|ALLOCATOR|FLAGS' [--config ...] --nodes N [--epochs 3]
//                            [--repeats 2] [--json bench/tiered/out/tiered.json]
//
// FLAGS are `gpumem train` flags for that configuration, e.g. '--row-blocks 50 --feature-dtype bf16'.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { cliArgs } from '../lib/args.js';
import { formatBytes, median } from '@gpumem/allocator-core';
import { writeJson } from '../lib/output.js';

const cli = join(dirname(fileURLToPath(import.meta.url)), '../../packages/cli/dist/cli.js');
const usage = `Usage: node bench/tiered/run.js --config 'NAME|ALLOCATOR|FLAGS' [--config ...] [--nodes N] [--epochs E] [--repeats R] [--json FILE]
  --config NAME|ALLOCATOR|FLAGS  a configuration: a label, an allocator spec as gpumem train takes it, and
                                 more gpumem train flags (may be empty); repeat the flag for more
  --nodes N                      nodes of the random graph, 10 edges each (default 2000000)
  --epochs E                     epochs per run, the first left out (default 3)
  --repeats R                    runs per configuration, interleaved, each in a fresh process (default 2)
  --timeout S                    seconds a run may take before it is stopped (default 600)
  --json FILE                    where to write the JSON (default bench/tiered/out/tiered.json)`;

const { help, fail, integer } = cliArgs(usage);

function parseArgs(argv) {
  const args = { configs: [], nodes: 2_000_000, epochs: 3, repeats: 2, timeout: 600, json: 'bench/tiered/out/tiered.json' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--config') {
      const [name, allocator, flags = ''] = (argv[++i] ?? '').split('|');
      if (!name || !allocator) fail(`Expected NAME|ALLOCATOR|FLAGS for --config but received '${argv[i]}'`);
      args.configs.push({ name, allocator, flags: flags.split(/\s+/).filter(Boolean) });
    } else if (a === '--nodes') args.nodes = integer(argv[++i], '--nodes', 1);
    else if (a === '--epochs') args.epochs = integer(argv[++i], '--epochs', 2);
    else if (a === '--repeats') args.repeats = integer(argv[++i], '--repeats', 1);
    else if (a === '--timeout') args.timeout = integer(argv[++i], '--timeout', 1);
    else if (a === '--json') args.json = argv[++i];
    else if (a === '-h' || a === '--help') help();
    else fail(`Unknown argument '${a}'`);
  }
  if (args.configs.length === 0) fail('Expected at least one --config');
  return args;
}

/** Bytes of one pass over a CSR form of n rows and e nonzeros: rowptr, col and val. */
const csrPass = (n, e) => (n + 1) * 4 + e * 8;

/**
 * Passes over the graph's CSR forms per epoch, training and validation, by plan. The row-block plan
 * (models/gcn-blocked.ts) reads A three times in training (A·x by blocks, A·(a1·W2ᵀ), A·x again for
 * W1's gradient) and Aᵀ once, validation's forward A twice: 6. The plain plan with the input
 * aggregated every epoch reads A twice and Aᵀ twice, validation A twice: 6; with A·x taken once (its
 * default) A and Aᵀ once each, validation A once: 3.
 */
const graphPassesPerEpoch = (flags) =>
  flags.includes('--row-blocks') || /--input-aggregation[ =]every-epoch/.test(flags.join(' ')) ? 6 : 3;

function runOnce(args, config) {
  const out = join(tmpdir(), `gpumem-tiered-${process.pid}-${Date.now()}.json`);
  const argv = [
    cli,
    'train',
    '--model',
    'gcn',
    '--nodes',
    String(args.nodes),
    '--epochs',
    String(args.epochs),
    '--allocator',
    config.allocator,
    ...config.flags,
    '--json',
    out,
  ];
  const t0 = Date.now();
  try {
    execFileSync(process.execPath, argv, { stdio: ['ignore', 'ignore', 'pipe'], timeout: args.timeout * 1000 });
    const result = JSON.parse(readFileSync(out, 'utf8'));
    return { ok: true, wallMs: Date.now() - t0, epochs: result.epochs ?? result.result?.epochs };
  } catch (e) {
    const stderr = String(e.stderr ?? '')
      .trim()
      .split('\n')
      .slice(-3)
      .join(' ');
    return { ok: false, wallMs: Date.now() - t0, error: stderr || String(e.message) };
  } finally {
    rmSync(out, { force: true });
  }
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const runs = new Map(args.configs.map((c) => [c.name, []]));
  for (let r = 0; r < args.repeats; r++) {
    for (const config of args.configs) {
      const run = runOnce(args, config);
      runs.get(config.name).push(run);
      console.error(
        `${config.name} run ${r + 1}: ${run.ok ? `${run.epochs.map((e) => e.epochMs.toFixed(0)).join(', ')} ms` : `failed: ${run.error}`}`,
      );
    }
  }
  const edges = args.nodes * 10;
  const rows = args.configs.map((config) => {
    const done = runs.get(config.name).filter((r) => r.ok);
    const epochs = done.flatMap((r) => r.epochs.slice(1));
    if (epochs.length === 0) return { config, ok: false, error: runs.get(config.name).find((r) => !r.ok)?.error };
    const ms = epochs.map((e) => e.epochMs);
    const max = (key) => Math.max(...epochs.map((e) => e.stats[key] ?? 0));
    const peakAllocated = max('peakAllocatedBytes');
    const peakHost = max('peakHostAllocatedBytes');
    const hostTier = epochs.some((e) => e.stats.hostAllocatedBytes !== undefined);
    const last = epochs.at(-1);
    return {
      config,
      ok: true,
      medianEpochMs: median(ms),
      minEpochMs: Math.min(...ms),
      maxEpochMs: Math.max(...ms),
      peakAllocatedBytes: peakAllocated,
      peakHostAllocatedBytes: hostTier ? peakHost : undefined,
      bytesMovedToHost: hostTier ? max('bytesMovedToHost') : undefined,
      bytesMovedToDevice: hostTier ? max('bytesMovedToDevice') : undefined,
      graphPassBytesPerEpoch: graphPassesPerEpoch(config.flags) * csrPass(args.nodes, edges),
      loss: last.loss,
      accuracy: last.accuracy,
      epochsMs: ms,
    };
  });
  const header = [
    'configuration',
    'allocator',
    'flags',
    'median epoch (min–max)',
    'peak allocated',
    'of which host',
    'moved to host / device',
    'loss',
    'accuracy',
  ];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const r of rows) {
    const flags = r.config.flags.join(' ') || '-';
    if (!r.ok) {
      lines.push(`| ${r.config.name} | ${r.config.allocator} | ${flags} | failed: ${r.error} | | | | | |`);
      continue;
    }
    lines.push(
      `| ${r.config.name} | ${r.config.allocator} | ${flags} | ${r.medianEpochMs.toFixed(1)} ms (${r.minEpochMs.toFixed(1)}–${r.maxEpochMs.toFixed(1)}) | ` +
        `${formatBytes(r.peakAllocatedBytes)} | ${r.peakHostAllocatedBytes === undefined ? '-' : formatBytes(r.peakHostAllocatedBytes)} | ` +
        `${r.bytesMovedToHost === undefined ? '-' : `${formatBytes(r.bytesMovedToHost)} / ${formatBytes(r.bytesMovedToDevice)}`} | ${r.loss.toFixed(4)} | ${(100 * r.accuracy).toFixed(2)}% |`,
    );
  }
  console.log(
    `gcn-seed, ${args.nodes.toLocaleString('en-US')} nodes, ${edges.toLocaleString('en-US')} edges; ${args.repeats} runs x ${args.epochs} epochs per configuration (first epoch of each left out)\n`,
  );
  console.log(lines.join('\n'));
  console.log(
    `\none pass over a CSR form: ${formatBytes(csrPass(args.nodes, edges))}; an epoch (training and validation) makes 6 passes over the two forms with row blocks or the input aggregated every epoch, ${formatBytes(6 * csrPass(args.nodes, edges))}, and 3 with A·x once`,
  );
  writeJson(args.json, { nodes: args.nodes, edges, epochs: args.epochs, repeats: args.repeats, rows, runs: Object.fromEntries(runs) });
}

main();
