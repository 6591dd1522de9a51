#!/usr/bin/env node
/**
 * The `gpumem` command line.
 * @module
 */
import { formatSystemInfo, systemInfo } from '@gpumem/allocator-core';
import { loadAllocatorPlugins } from './plugins.js';

const usage = `Usage: gpumem <command> [options]

Commands:
  info [--json]   devices, driver and runtime versions, free/total memory, registered
                  strategies (plug-ins included), and whether cuBLAS/cuSPARSE load

Options:
  -h, --help      show this help

Examples:
  gpumem info
  gpumem info --json > system.json
`;

/** Exit codes: 0 ok, 1 failure, 2 bad usage. */
async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    process.stdout.write(usage);
    return command === undefined ? 2 : 0;
  }
  if (command === 'info') {
    const unknown = rest.filter((a) => a !== '--json' && a !== '-h' && a !== '--help');
    if (rest.includes('-h') || rest.includes('--help')) {
      process.stdout.write(usage);
      return 0;
    }
    if (unknown.length > 0) {
      process.stderr.write(`gpumem info: unknown option '${unknown[0]}' (accepted: --json, --help)\n`);
      return 2;
    }
    await loadAllocatorPlugins();
    const info = systemInfo();
    process.stdout.write(rest.includes('--json') ? `${JSON.stringify(info, null, 2)}\n` : `${formatSystemInfo(info)}\n`);
    return 0;
  }
  process.stderr.write(`gpumem: unknown command '${command}' (accepted: info)\n\n${usage}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`gpumem: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
