// One process of the epoch-time noise diagnosis (bench/gpu/diag-epoch-noise.sh runs it under each
// placement): trains the mlp (MNIST, the defaults of `gpumem train`) and prints one JSON line with,
// per epoch, the wall time and what the process did meanwhile: its CPU time, garbage collection,
// context switches, the CPUs it ran on and their clock, and how long the host took to issue the
// training steps (the trainer does not wait for the GPU within an epoch).
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
  };
  marks.push(current);
  sample();
};
const onProgress = (p) => {
  if (!current || current.epoch !== p.epoch) begin(p.epoch);
  current.lastStepAt = performance.now();
  if (p.step % 64 === 0) sample();
};
const options = { model: 'mlp', allocator: values.allocator, epochs, onProgress };
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
    gcTotalMs: +gcs.reduce((s, g) => s + g.ms, 0).toFixed(1),
    epochs: out,
  }),
);
