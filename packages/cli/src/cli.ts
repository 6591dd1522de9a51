#!/usr/bin/env node
/**
 * The `gpumem` command line.
 * @module
 */
// First, before any other module of the CLI runs: stops on a Node.js older than engines' floor.
import './node-version-guard.js';
import { createRequire } from 'node:module';
import { formatSystemInfo, systemInfo } from '@gpumem/allocator-core';
import { loadAllocatorPlugins, pluginNames } from './plugins.js';
import { UsageError } from './commands/args.js';
import { runTrain, trainUsage } from './commands/train-command.js';
import { recordUsage, runRecord } from './commands/record-command.js';
import { replayUsage, runReplay } from './commands/replay-command.js';
import { compareUsage, runCompare } from './commands/compare-command.js';
import { doctorUsage, runDoctor } from './commands/doctor-command.js';
import { stdoutText, stderrText } from './terminal.js';

const usage = `Usage: gpumem <command> [options]

Commands:
  info [--json]   devices, driver and runtime versions, free/total memory, peer access
                  and links between the devices (NVLink count or PCIe), registered
                  strategies (plug-ins included), and whether cuBLAS/cuSPARSE load
  train [flags]   train the MLP (MNIST) or the GCN (generated graphs) on one allocator;
                  gpumem train --help lists the flags
  record [flags]  train with allocation tracking on and write the trace (JSONL or RMM's
                  CSV); gpumem record --help lists the flags
  replay FILE     replay a program's allocations through each allocator and say which
                  suits it and how much GPU it needs: a PyTorch memory snapshot
                  (torch.cuda.memory._dump_snapshot), a gpumem JSONL trace or an RMM CSV
                  log; time per call, peak memory, fragmentation; gpumem replay --help
  doctor FILE     is this OOM real? a PyTorch snapshot or a trace against a device's
                  capacity: fits, fragmentation (another strategy fits) or real (the
                  live bytes exceed it, and what would reduce them); gpumem doctor --help
  compare [flags] the same model under each allocator: one table, an HTML report, a
                  Perfetto trace; gpumem compare --help lists the flags

Options:
  -v, --version   print gpumem's version
  --plugin NAME   load an allocator plug-in: a package name (resolved from the current
                  directory first, then from gpumem's install) or a path (./ or /): a
                  module file or a package folder (its package.json's exports or
                  main); repeatable.
                  A plug-in runs as code of yours: a node_modules folder in the current
                  directory or any folder above it comes first, and can shadow the plug-in
                  you meant; give a path to be sure. Where each was loaded from is
                  printed on stderr
  -h, --help      show this help (gpumem help COMMAND: that command's)

Environment:
  GPUMEM_PLUGINS  comma-separated plug-ins to load, as --plugin (resolved the same way)

Examples:
  gpumem info
  gpumem info --json > system.json
  gpumem train --model mlp --allocator pool --epochs 3
  gpumem record --out mlp.jsonl --model mlp --allocator pool
  gpumem replay snapshot.pickle --min-capacity --report pick.html
  gpumem replay mlp.jsonl --allocators pool,host
  gpumem doctor oom.pickle --capacity 40GiB
  gpumem compare --report report.html
`;

/** Each command's own help, for `gpumem help COMMAND`. */
const commandUsage: Record<string, string> = {
  train: trainUsage,
  record: recordUsage,
  replay: replayUsage,
  compare: compareUsage,
  doctor: doctorUsage,
  info: usage,
};

/** This package's version, from its package.json. */
function cliVersion(): string {
  return (createRequire(import.meta.url)('../package.json') as { version: string }).version;
}

/** Takes every `--plugin NAME` / `--plugin=NAME` out of argv (any command accepts it). */
function takePluginFlags(argv: readonly string[]): { argv: string[]; plugins: string[] } {
  const out: string[] = [];
  const plugins: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--plugin') {
      const value = argv[i + 1];
      if (value === undefined || value.startsWith('--'))
        throw new UsageError(`gpumem: '--plugin' needs a package name or path, e.g. --plugin @acme/allocator-slab`);
      plugins.push(...pluginNames(value));
      i++;
    } else if (a.startsWith('--plugin=')) {
      plugins.push(...pluginNames(a.slice('--plugin='.length)));
    } else {
      out.push(a);
    }
  }
  return { argv: out, plugins };
}

/** Exit codes: 0 ok, 1 failure, 2 bad usage. */
async function main(given: string[]): Promise<number> {
  const { argv, plugins: pluginFlags } = takePluginFlags(given);
  const load = () => loadAllocatorPlugins([...pluginNames(process.env.GPUMEM_PLUGINS), ...pluginFlags]);
  const [command, ...rest] = argv;
  if (command === '--version' || command === '-v' || command === 'version') {
    stdoutText.write(`gpumem ${cliVersion()}\n`);
    return 0;
  }
  if (command === 'help' && rest[0] !== undefined && Object.hasOwn(commandUsage, rest[0])) {
    stdoutText.write(commandUsage[rest[0]]!);
    return 0;
  }
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    stdoutText.write(usage);
    return command === undefined ? 2 : 0;
  }
  if (command === 'info') {
    const unknown = rest.filter((a) => a !== '--json' && a !== '-h' && a !== '--help');
    if (rest.includes('-h') || rest.includes('--help')) {
      stdoutText.write(usage);
      return 0;
    }
    if (unknown.length > 0) {
      stderrText.write(`gpumem info: unknown option '${unknown[0]}' (accepted: --json, --help)\n`);
      return 2;
    }
    await load();
    const info = systemInfo();
    process.stdout.write(rest.includes('--json') ? `${JSON.stringify(info, null, 2)}\n` : `${formatSystemInfo(info)}\n`);
    return 0;
  }
  if (command === 'train') {
    return runTrain(rest, await load());
  }
  if (command === 'record' || command === 'replay' || command === 'doctor') {
    const plugins = await load();
    return command === 'record' ? runRecord(rest, plugins) : command === 'replay' ? runReplay(rest, plugins) : runDoctor(rest, plugins);
  }
  if (command === 'compare') {
    return runCompare(rest, await load());
  }
  stderrText.write(`gpumem: unknown command '${command}' (accepted: info, train, compare, record, replay, doctor)\n\n${usage}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (e instanceof UsageError) {
      stderrText.write(`${e.message}\n`);
      process.exitCode = 2;
      return;
    }
    stderrText.write(`gpumem: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
