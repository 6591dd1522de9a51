#!/usr/bin/env node
// Writes the fragmentation patterns (patterns.js) as gzip-compressed gpumem JSONL traces, readable by
// `gpumem replay` and by readTrace of @gpumem/trace:
//
//   node bench/fragmentation/generate.js [--out-dir bench/fragmentation/traces]
//
// The traces are deterministic; the committed ones are this script's output.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { serializeTrace } from '@gpumem/trace';
import { patterns } from './patterns.js';

const defaultDir = new URL('./traces/', import.meta.url).pathname;

/** Writes every pattern to `dir`; returns the paths by pattern name. */
export function generateTraces(dir = defaultDir) {
  mkdirSync(dir, { recursive: true });
  const paths = {};
  for (const [name, make] of Object.entries(patterns)) {
    const path = join(dir, `${name}.jsonl.gz`);
    // mtime 0 in the gzip header (zlib's default): the same bytes on every run.
    writeFileSync(path, gzipSync(serializeTrace(make(), 'jsonl'), { level: 9 }));
    paths[name] = path;
  }
  return paths;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf('--out-dir');
  const dir = i >= 0 ? process.argv[i + 1] : defaultDir;
  if (dir === undefined) {
    console.error('Usage: node bench/fragmentation/generate.js [--out-dir DIR]');
    process.exit(2);
  }
  for (const [name, path] of Object.entries(generateTraces(dir))) console.log(`${name}: ${path}`);
}
