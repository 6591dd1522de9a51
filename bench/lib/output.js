// The end of a bench script: its cells formatted, its table printed (Markdown, columns padded), its
// JSON written (folders made, pretty-printed, a line saying where) and its main function run with
// any error as one line on stderr (exit 1).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** Nanoseconds for a table cell: `312.4 ns` below a microsecond, `1.25 µs` from there. */
export function formatNs(ns) {
  return ns >= 1000 ? `${(ns / 1000).toFixed(2)} µs` : `${ns.toFixed(1)} ns`;
}

/** Prints `rows` (arrays of strings) under `header` as a Markdown table, each column as wide as its widest cell. */
export function printTable(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}

/** Writes `result` as indented JSON to `path`, making its folder, and says so on stdout. */
export function writeJson(path, result) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`\nwrote ${path}`);
}

/** Runs `main` (sync or async); an error is `NAME: message` on stderr and exit status 1. */
export async function runMain(name, main) {
  try {
    await main();
  } catch (e) {
    console.error(`${name}: ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  }
}
