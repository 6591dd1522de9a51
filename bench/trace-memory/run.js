#!/usr/bin/env node
// bench/trace-memory: the peak memory of replaying a JSONL trace, per million events.
//
//   node bench/trace-memory/run.js [--events 1000000,4000000] [--out FILE]
//
// For each count, writes a JSONL trace of that many events (as `gpumem record` writes them: a
// header, then alloc/free events on two streams with tags and reserved bytes; at most 512
// allocations live, so the allocator's own memory stays small), then replays it in a fresh Node
// process: readTrace, compileTrace and one replayTrace pass through the host strategy. That
// process reports its peak RSS; the baseline is the same process without a trace. Per million
// events = (peak - baseline) / events * 10^6.
import { spawnSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '@gpumem/allocator-core/tools';
import { cliArgs } from '../lib/args.js';
import { writeJson } from '../lib/output.js';

const usage = 'Usage: node bench/trace-memory/run.js [--events N,N,...] [--out FILE]';
const self = fileURLToPath(import.meta.url);

function parseArgs(argv) {
  const { help, fail, integer } = cliArgs(usage);
  const a = { events: [1_000_000, 4_000_000], out: 'bench/trace-memory/out/trace-memory.json' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--events' && v) a.events = argv[++i].split(',').map((n) => integer(n, '--events', 1));
    else if (k === '--out' && v) a.out = argv[++i];
    else if (k === '-h' || k === '--help') help();
    else fail(`bench/trace-memory: bad or unknown option '${k}'`);
  }
  return a;
}

/** Writes a JSONL trace of `count` events to `file`. */
async function writeTraceFile(file, count) {
  const out = createWriteStream(file);
  const rnd = seededRandom(count);
  const sizes = [256, 512, 4096, 65536, 1 << 20];
  const live = []; // [slot, bytes]
  const freeSlots = Array.from({ length: 512 }, (_, i) => 511 - i);
  let reserved = 0;
  let batch = `${JSON.stringify({ format: 'gpumem-trace', version: 1, source: 'bench/trace-memory', allocator: 'pool', device: 'host', eventCount: count, tags: ['setup', 'forward', 'backward', 'optimizer'] })}\n`;
  for (let i = 0; i < count; i++) {
    const alloc = live.length === 0 || (freeSlots.length > 0 && rnd() < 0.5);
    let slot;
    let bytes;
    if (alloc) {
      slot = freeSlots.pop();
      bytes = sizes[Math.floor(rnd() * sizes.length)];
      live.push([slot, bytes]);
      reserved = Math.max(
        reserved,
        live.reduce((s, [, b]) => s + b, 0),
      );
    } else {
      const k = Math.floor(rnd() * live.length);
      [slot, bytes] = live[k];
      live[k] = live[live.length - 1];
      live.pop();
      freeSlots.push(slot);
    }
    const event = {
      timeNs: i * 1000,
      action: alloc ? 'alloc' : 'free',
      ptr: 0x7f3a2c000000 + slot * 0x200000,
      bytes,
      stream: (i >> 4) % 2 === 0 ? 0 : 0x5612a8e3c9f0,
      tag: (i >> 6) % 4,
      reservedBytes: reserved,
    };
    batch += `${JSON.stringify(event)}\n`;
    if (batch.length > 1 << 20) {
      if (!out.write(batch)) await once(out, 'drain');
      batch = '';
    }
  }
  out.end(batch);
  await once(out, 'finish');
}

/** The child: replays `file` (or nothing, for the baseline) and prints its peak RSS in bytes. */
async function child(file) {
  const { createAllocator } = await import('@gpumem/allocator-core');
  const { readTrace, compileTrace, replayTrace } = await import('@gpumem/trace');
  let events = 0;
  if (file) {
    const trace = await readTrace(file);
    const compiled = compileTrace(trace);
    const allocator = createAllocator('host');
    try {
      replayTrace(compiled, allocator, { repeats: 1 });
    } finally {
      allocator.dispose();
    }
    events = trace.events.length; // the trace stays alive through the replay, as in `gpumem replay`
  }
  console.log(JSON.stringify({ events, peakRssBytes: process.resourceUsage().maxRSS * 1024 }));
}

function measure(file) {
  const started = performance.now();
  const r = spawnSync(process.execPath, [self, '--child', file ?? ''], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`the replay process failed (${r.status ?? r.signal}):\n${r.stderr}`);
  return { ...JSON.parse(r.stdout.trim().split('\n').pop()), seconds: (performance.now() - started) / 1000 };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), 'gpumem-trace-memory-'));
  const rows = [];
  try {
    const baseline = measure(undefined);
    for (const count of args.events) {
      const file = join(dir, `trace-${count}.jsonl`);
      await writeTraceFile(file, count);
      const fileBytes = statSync(file).size;
      const run = measure(file);
      rmSync(file);
      const perMillion = ((run.peakRssBytes - baseline.peakRssBytes) / count) * 1e6;
      rows.push({
        events: count,
        fileBytes,
        peakRssBytes: run.peakRssBytes,
        baselineRssBytes: baseline.peakRssBytes,
        bytesPerMillionEvents: perMillion,
        bytesPerEvent: perMillion / 1e6,
        seconds: run.seconds,
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  console.log(`peak RSS of a JSONL replay (readTrace, compileTrace, one host pass), Node ${process.version}`);
  console.table(
    rows.map((r) => ({
      events: r.events,
      file: mib(r.fileBytes),
      'peak RSS': mib(r.peakRssBytes),
      baseline: mib(r.baselineRssBytes),
      'per million events': mib(r.bytesPerMillionEvents),
      'per event': `${r.bytesPerEvent.toFixed(0)} B`,
      seconds: r.seconds.toFixed(1),
    })),
  );
  writeJson(args.out, { node: process.version, date: new Date().toISOString(), args, rows });
}

if (process.argv[2] === '--child') await child(process.argv[3] || undefined);
else await main();
