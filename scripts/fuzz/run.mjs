#!/usr/bin/env node
// The trace readers' fuzzer: mutations of each reader's seeds (the trace package's fixtures and small
// generated traces) and the size bombs that once broke them, each read by @gpumem/trace's readTrace
// (built) in a child process under a heap limit, a time limit and a bound on resident memory. Every
// outcome must be a sound trace or a typed error (TraceFormatError, TraceFileError); anything else
// is a defect, whose input is written to the output folder, and the run exits 1. Prints a table and
// writes JSON. Seeded: case N of a seed is the same input on every run.
//
//   node scripts/fuzz/run.mjs [--seed N] [--iterations N | --seconds S] [--out DIR] [--jobs N]
//   node scripts/fuzz/run.mjs --replay DIR/case-N.bin
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { cliArgs } from '../../bench/lib/args.js';
import { seededRandom } from '@gpumem/allocator-core/tools';
import { defaultLimits, runCases } from './harness.mjs';
import { sizeBombs } from './bombs.mjs';
import { fuzzCase } from './mutate.mjs';
import { fuzzFormats, fuzzSeeds } from './seeds.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const MiB = 2 ** 20;

const usage = `Usage: node scripts/fuzz/run.mjs [options]
  --seed N           the run's seed (default 1): case N of a seed is the same input on every run
  --iterations N     mutated cases to run (default 2000), after the size bombs
  --seconds S        run mutated cases for S seconds instead (the last ones finish after)
  --jobs N           child processes reading at once (default 2, at most the CPUs)
  --timeout-ms N     the longest a case may take, plus ${defaultLimits.timeoutPerMiBMs} ms a MiB of its content (default ${defaultLimits.timeoutMs})
  --heap-mb N        each child's V8 heap (default ${defaultLimits.heapMb})
  --bomb-mb N        what the pickle of zeros among the size bombs decompresses to (default 256)
  --rss-slack-mb N   resident memory a case may add besides 1.25 bytes per byte of content (default ${defaultLimits.rssSlackBytes / MiB})
  --max-rss-mb N     the most resident memory a worker may hold at any time (default ${defaultLimits.maxRssBytes / MiB})
  --out DIR          where fuzz.json and the defects' inputs go (default test-artifacts/fuzz)
  --reader FILE      the reader module (read(path, options), typedErrors; default scripts/fuzz/reader.mjs)
  --replay FILE      reads one saved input (a defect's case-N.bin, its options from case-N.json) and exits`;

const { help, fail, integer } = cliArgs(usage);

function parseArgs(argv) {
  const args = {
    seed: 1,
    iterations: undefined,
    seconds: undefined,
    jobs: Math.min(2, availableParallelism()),
    limits: { ...defaultLimits },
    bombBytes: 256 * MiB,
    out: join(root, 'test-artifacts/fuzz'),
    reader: fileURLToPath(new URL('./reader.mjs', import.meta.url)),
    replay: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : fail(`${a} needs a value`));
    if (a === '--seed') args.seed = integer(value(), a, 0);
    else if (a === '--iterations') args.iterations = integer(value(), a, 0);
    else if (a === '--seconds') args.seconds = integer(value(), a, 1);
    else if (a === '--jobs') args.jobs = integer(value(), a, 1);
    else if (a === '--timeout-ms') args.limits.timeoutMs = integer(value(), a, 1);
    else if (a === '--heap-mb') args.limits.heapMb = integer(value(), a, 16);
    else if (a === '--bomb-mb') args.bombBytes = integer(value(), a, 1) * MiB;
    else if (a === '--rss-slack-mb') args.limits.rssSlackBytes = integer(value(), a, 1) * MiB;
    else if (a === '--max-rss-mb') args.limits.maxRssBytes = integer(value(), a, 64) * MiB;
    else if (a === '--out') args.out = value();
    else if (a === '--reader') args.reader = value();
    else if (a === '--replay') args.replay = value();
    else if (a === '-h' || a === '--help') help();
    else fail(`scripts/fuzz: unknown option '${a}'`);
  }
  if (args.iterations !== undefined && args.seconds !== undefined) fail('give --iterations or --seconds, not both');
  args.iterations ??= args.seconds === undefined ? 2000 : Number.POSITIVE_INFINITY;
  return args;
}

const args = parseArgs(process.argv.slice(2));
// The RMM CSV seed is written in local time of day: the same seeds, and cases, in every time zone.
process.env.TZ = 'UTC';
const work = mkdtempSync(join(tmpdir(), 'gpumem-fuzz-'));
const started = performance.now();
const elapsed = () => (performance.now() - started) / 1000;

/** The cases of the run: the size bombs, then mutated seeds until the iterations or the seconds are done. */
async function caseSource() {
  if (args.replay !== undefined) {
    const metaPath = args.replay.replace(/\.bin$/, '.json');
    let meta = {};
    try {
      meta = JSON.parse(readFileSync(metaPath, 'utf8'));
    } catch {
      // no metadata beside it: default options
    }
    const bytes = readFileSync(args.replay);
    const cases = [
      {
        index: meta.index ?? 0,
        format: meta.format ?? 'unknown',
        seed: meta.from ?? args.replay,
        mutation: meta.mutation ?? 'replay',
        bytes,
        contentBytes: meta.contentBytes ?? bytes.length,
        values: meta.values ?? 0,
        options: meta.options ?? {},
      },
    ];
    return () => cases.shift();
  }
  const seeds = fuzzSeeds(root, gunzipSync).filter((s) => s.content.length <= MiB); // the bigger fixtures are size bombs of their own
  const bombs = (await sizeBombs({ bombBytes: args.bombBytes })).map((c, i) => ({ ...c, index: -1 - i }));
  const rnd = seededRandom(args.seed);
  let index = 0;
  return () => {
    if (bombs.length > 0) return bombs.shift();
    if (index >= args.iterations || (args.seconds !== undefined && elapsed() >= args.seconds)) return undefined;
    return fuzzCase(index++, seeds, rnd);
  };
}

const tally = new Map(); // format -> counts
const byMutation = new Map(); // mutation -> counts
const defects = [];
let slowest = [];
const counts = () => ({ cases: 0, ok: 0, typed: 0, defect: 0, maxMs: 0, maxGrewBytes: 0 });

function record(c, r) {
  const mutation = c.mutation.split('+')[0];
  for (const [map, key] of [
    [tally, c.format],
    [byMutation, mutation],
  ]) {
    if (!map.has(key)) map.set(key, counts());
    const t = map.get(key);
    t.cases++;
    t[r.outcome]++;
    t.maxMs = Math.max(t.maxMs, r.ms);
    t.maxGrewBytes = Math.max(t.maxGrewBytes, r.grewBytes ?? 0);
  }
  slowest = [...slowest, { index: c.index, format: c.format, seed: c.seed, mutation: c.mutation, ms: Math.round(r.ms), outcome: r.outcome }]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 5);
  if (r.outcome !== 'defect') return;
  if (args.replay !== undefined) {
    console.error(`DEFECT ${args.replay}: ${r.detail}`);
    defects.push({ file: args.replay, detail: r.detail });
    return;
  }
  const name = `case-${c.index}`;
  const dir = join(args.out, 'defects');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.bin`), c.bytes);
  const meta = {
    index: c.index,
    seed: args.seed,
    format: c.format,
    from: c.seed,
    mutation: c.mutation,
    options: c.options,
    contentBytes: c.contentBytes,
    values: c.values,
    detail: r.detail,
  };
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(meta, null, 2)}\n`);
  defects.push({ ...meta, file: join(dir, `${name}.bin`) });
  console.error(`DEFECT case ${c.index} (${c.format}, ${c.seed}, ${c.mutation}): ${r.detail}\n  input: ${join(dir, `${name}.bin`)}`);
}

try {
  await runCases(await caseSource(), { readerPath: args.reader, dir: work, jobs: args.jobs, limits: args.limits, onResult: record });
} finally {
  rmSync(work, { recursive: true, force: true });
}

const seconds = elapsed();
const row = (label, t) =>
  `${label.padEnd(22)} ${String(t.cases).padStart(7)} ${String(t.ok).padStart(7)} ${String(t.typed).padStart(7)} ${String(t.defect).padStart(7)} ${t.maxMs.toFixed(0).padStart(8)} ${(t.maxGrewBytes / MiB).toFixed(0).padStart(9)}`;
const head = `${''.padEnd(22)} ${'cases'.padStart(7)} ${'ok'.padStart(7)} ${'typed'.padStart(7)} ${'DEFECT'.padStart(7)} ${'max ms'.padStart(8)} ${'+MiB'.padStart(9)}`;
const total = [...tally.values()].reduce(
  (s, t) => ({
    cases: s.cases + t.cases,
    ok: s.ok + t.ok,
    typed: s.typed + t.typed,
    defect: s.defect + t.defect,
    maxMs: Math.max(s.maxMs, t.maxMs),
    maxGrewBytes: Math.max(s.maxGrewBytes, t.maxGrewBytes),
  }),
  counts(),
);
console.log(`trace fuzzer: seed ${args.seed}, ${total.cases} cases in ${seconds.toFixed(1)} s, ${args.jobs} job(s)`);
console.log(head);
for (const format of fuzzFormats) if (tally.has(format)) console.log(row(format, tally.get(format)));
console.log(row('total', total));
const measured = [...tally.values()].some((t) => t.maxGrewBytes > 0);
console.log(
  measured
    ? 'max ms: the slowest case; +MiB: the most resident memory a case added (its peak less its start)'
    : 'max ms: the slowest case; resident memory per case not measured (/proc/self/clear_refs cannot be written here)',
);
console.log(`\n${head.replace(''.padEnd(22), 'mutation'.padEnd(22))}`);
for (const [mutation, t] of [...byMutation].sort((a, b) => a[0].localeCompare(b[0]))) console.log(row(mutation, t));

if (args.replay === undefined) {
  mkdirSync(args.out, { recursive: true });
  const json = {
    seed: args.seed,
    seconds: Math.round(seconds * 10) / 10,
    jobs: args.jobs,
    limits: { ...args.limits, bombBytes: args.bombBytes },
    node: process.version,
    total,
    formats: Object.fromEntries(tally),
    mutations: Object.fromEntries(byMutation),
    slowest,
    defects,
  };
  writeFileSync(join(args.out, 'fuzz.json'), `${JSON.stringify(json, null, 2)}\n`);
  console.log(`\nwrote ${join(args.out, 'fuzz.json')}`);
}
if (defects.length > 0) {
  if (args.replay === undefined) {
    console.error(
      `${defects.length} defect(s): inputs in ${join(args.out, 'defects')} (node scripts/fuzz/run.mjs --replay FILE reads one again)`,
    );
  }
  process.exit(1);
}
