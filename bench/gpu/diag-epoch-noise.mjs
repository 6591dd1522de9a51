// One process of the epoch-time noise diagnosis (bench/gpu/diag-epoch-noise.sh runs it under each
// placement): trains the mlp (MNIST, the defaults of `gpumem train`) and prints one JSON line with,
// per epoch, the wall time and what the process did meanwhile: its CPU time, garbage collection,
// context switches, the CPUs it ran on and their clock, and how long the host took to issue the
// training steps (the trainer does not wait for the GPU within an epoch), the spread of the host's
// time per step, the machine's stolen CPU time, and a fixed piece of work (a JavaScript loop, pool
// malloc+free pairs) timed before and after training.
//
//   node bench/gpu/diag-epoch-noise.mjs [--allocator pool] [--epochs 4] [--label NAME] [--record]
//
// --record also tracks every allocation event, as `gpumem compare` does.
import { readFileSync } from 'node:fs';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    allocator: { type: 'string', default: 'pool' },
    epochs: { type: 'string', default: '4' },
    label: { type: 'string', default: 'plain' },
    record: { type: 'boolean', default: false },
  },
});
const { builtInStrategyPackages, runOne } = await import('@gpumem/compare');
for (const m of builtInStrategyPackages) await import(m);
const { train } = await import('@gpumem/gnn');
const { createAllocator } = await import('@gpumem/allocator-core');

const gcs = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcs.push({ start: e.startTime, ms: e.duration, kind: e.detail?.kind ?? e.kind });
}).observe({ entryTypes: ['gc'] });

/** The CPU this thread runs on (field 39 of /proc/self/stat), or -1. */
function currentCpu() {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[36]);
  } catch {
    return -1;
  }
}
/** The current clock of a CPU in MHz, from cpufreq or /proc/cpuinfo, or null. */
function cpuMHz(cpu) {
  try {
    return Number(readFileSync(`/sys/devices/system/cpu/cpu${cpu}/cpufreq/scaling_cur_freq`, 'utf8')) / 1000;
  } catch {
    const blocks = readFileSync('/proc/cpuinfo', 'utf8').split('\n\n');
    const block = blocks.find((b) => new RegExp(`^processor\\s*:\\s*${cpu}$`, 'm').test(b));
    const m = block && /cpu MHz\s*:\s*([\d.]+)/.exec(block);
    return m ? Number(m[1]) : null;
  }
}

/** The machine's stolen CPU time so far (ms, all CPUs, /proc/stat), or null. */
function stealMs() {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
    return (Number(f[8]) * 1000) / 100;
  } catch {
    return null;
  }
}
/** Fixed work, timed: a JavaScript integer loop, and pool malloc+free pairs (the native call path). */
function probe() {
  let t = performance.now();
  let x = 2463534242 | 0;
  let acc = 0;
  for (let i = 0; i < 3e7; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    acc = (acc + x) | 0;
  }
  const jsMs = performance.now() - t;
  const a = createAllocator(values.allocator, {});
  const p0 = a.malloc(4096);
  a.free(p0, 4096);
  t = performance.now();
  for (let i = 0; i < 2e5; i++) a.free(a.malloc(4096), 4096);
  const nativeMs = performance.now() - t;
  a.dispose();
  return { jsMs: +jsMs.toFixed(1), nativeMs: +nativeMs.toFixed(1), acc };
}

const epochs = Number(values.epochs);
const marks = []; // per epoch: samples taken every 64 steps
let current = null;
const sample = () => {
  const cpu = currentCpu();
  current.cpus.add(cpu);
  const mhz = cpuMHz(cpu);
  if (mhz !== null) current.mhz.push(mhz);
};
const begin = (epoch) => {
  current = {
    epoch,
    t0: performance.now(),
    cpu0: process.cpuUsage(),
    ru0: process.resourceUsage(),
    cpus: new Set(),
    mhz: [],
    lastStepAt: 0,
    steal0: stealMs(),
    steps: [],
  };
  marks.push(current);
  sample();
};
const onProgress = (p) => {
  if (!current || current.epoch !== p.epoch) begin(p.epoch);
  const now = performance.now();
  current.steps.push(now - (current.lastStepAt || current.t0));
  current.lastStepAt = now;
  if (p.step % 64 === 0) sample();
};
const options = { model: 'mlp', allocator: values.allocator, epochs, onProgress };
const probeBefore = probe();
const t = performance.now();
const result = values.record
  ? runOne(
      {
        spec: { name: values.allocator, options: {} },
        train: { model: 'mlp', epochs },
        record: true,
        trackingCapacity: 1 << 20,
        timelinePoints: 4000,
        plugins: [],
      },
      onProgress,
    )
  : train(options);
if (!result.epochs?.length) throw new Error(`the run failed: ${JSON.stringify(result).slice(0, 400)}`);
const totalMs = performance.now() - t;
const usage = process.resourceUsage();
const stealEnd = stealMs();
const probeAfter = probe();
await new Promise((r) => setTimeout(r, 50)); // let the gc entries arrive

const rows = result.epochs.map((e, i) => {
  const end = e.startMs + e.epochMs;
  return { e, m: marks[i], inEpoch: gcs.filter((g) => g.start >= e.startMs && g.start < end) };
});
const out = rows.map(({ e, m, inEpoch }, i) => {
  const next = rows[i + 1]?.m;
  const cpuEnd = next ? next.cpu0 : null;
  const cpuMs = cpuEnd ? (cpuEnd.user - m.cpu0.user + cpuEnd.system - m.cpu0.system) / 1000 : null;
  const ruEnd = next ? next.ru0 : usage;
  const steps = Float64Array.from(m.steps).sort();
  const q = (f) => +steps[Math.min(steps.length - 1, Math.floor(f * steps.length))].toFixed(4);
  const p50 = q(0.5);
  const spikeMs = m.steps.reduce((s, d) => s + (d > 3 * p50 ? d - p50 : 0), 0);
  const stealEnd_ = next ? next.steal0 : stealEnd;
  return {
    epoch: e.epoch,
    epochMs: +e.epochMs.toFixed(2),
    issueMs: +(m.lastStepAt - e.startMs).toFixed(2),
    cpuMs: cpuMs === null ? null : +cpuMs.toFixed(1),
    gcMs: +inEpoch.reduce((s, g) => s + g.ms, 0).toFixed(2),
    gcCount: inEpoch.length,
    involuntarySwitches: ruEnd.involuntaryContextSwitches - m.ru0.involuntaryContextSwitches,
    voluntarySwitches: ruEnd.voluntaryContextSwitches - m.ru0.voluntaryContextSwitches,
    minorFaults: ruEnd.minorPageFault - m.ru0.minorPageFault,
    stepMs: { p10: q(0.1), p50, p90: q(0.9), p99: q(0.99), max: q(1), spikeMs: +spikeMs.toFixed(2), n: steps.length },
    stealMs: m.steal0 === null || stealEnd_ === null ? null : stealEnd_ - m.steal0,
    cpus: [...m.cpus].sort((a, b) => a - b),
    mhz: m.mhz.length ? { min: Math.min(...m.mhz), max: Math.max(...m.mhz) } : null,
  };
});
let allowed = '';
try {
  allowed = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '';
} catch {}
console.log(
  JSON.stringify({
    label: values.label,
    allocator: values.allocator,
    record: values.record,
    pid: process.pid,
    cpusAllowed: allowed,
    totalMs: +totalMs.toFixed(1),
    probeBefore,
    probeAfter,
    gcTotalMs: +gcs.reduce((s, g) => s + g.ms, 0).toFixed(1),
    epochs: out,
  }),
);
