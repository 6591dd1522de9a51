// The mlp data parallel over two GPUs, captured into CUDA graphs and not, against one device: each
// step's loss per run, and per rank its share of it, so that one run on a two-GPU host tells which
// part is wrong (the devices: the eager two-GPU run is off too; the graphs: only the captured one
// is; the step losses' bookkeeping: a rank's shares are 0 after step 0, or the same every step).
// MNIST, 12,800 images, one epoch of 200 steps of 64 (the case of tests/distributed-gpu.test.ts),
// about a minute. From the project root, after `npm run build`:
//
//   node bench/gpu/diag-two-gpu-mlp.mjs          # the first 8 steps and every 25th
//   node bench/gpu/diag-two-gpu-mlp.mjs --all    # every step
//
// Exit status: 0 when every run's first 5 steps are within 1e-5 of its one-device reference,
// 1 when not, 2 without two CUDA devices or NCCL.
import { builtInStrategyPackages } from '@gpumem/compare';
for (const m of builtInStrategyPackages) await import(m);
const { deviceCount } = await import('@gpumem/allocator-core');
const { ncclLibrary } = await import('@gpumem/distributed');
const { train, trainDistributed } = await import('@gpumem/gnn');

const nccl = ncclLibrary();
if (deviceCount() < 2 || !nccl.available) {
  console.log(`needs 2 CUDA devices and NCCL: ${deviceCount()} device(s) here${nccl.available ? '' : `; ${nccl.reason}`}`);
  process.exit(2);
}
const all = process.argv.includes('--all');
const imports = [...builtInStrategyPackages];
const mlp = { model: 'mlp', allocator: 'pool', epochs: 1, trainSubset: 12800, testSubset: 2000 };

const timed = async (name, f) => {
  const t0 = performance.now();
  try {
    const r = await f();
    console.log(`${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s, devices ${r.device}`);
    return r;
  } catch (e) {
    console.log(`${name}: FAILED after ${((performance.now() - t0) / 1000).toFixed(1)} s: ${e?.stack ?? e}`);
    return undefined;
  }
};
const runs = {
  eager1: await timed('1 device, eager (train)', () => train(mlp)),
  graph1: await timed('1 device, captured (train, cudaGraph)', () => train({ ...mlp, cudaGraph: true })),
  host00: await timed('2 host ranks on cuda:0, eager', () => trainDistributed({ ...mlp, imports, devices: [0, 0], communicator: 'host' })),
  nccl1graph: await timed('1 NCCL rank on cuda:0, captured', () => trainDistributed({ ...mlp, imports, cudaGraph: true, devices: 1 })),
  nccl01: await timed('2 NCCL ranks on cuda:0,1, eager', () => trainDistributed({ ...mlp, imports, devices: 2 })),
  nccl01graph: await timed('2 NCCL ranks on cuda:0,1, captured', () => trainDistributed({ ...mlp, imports, cudaGraph: true, devices: 2 })),
};

const losses = (r) => r?.epochs[0]?.losses ?? [];
const rel = (a, b) => (a === undefined || b === undefined ? NaN : Math.abs(a - b) / Math.abs(b));
const steps = losses(runs.eager1).length;
const shown = Array.from({ length: steps }, (_, s) => s).filter((s) => all || s < 8 || s % 25 === 0 || s === steps - 1);

// per step: each run's loss, and per rank of the two-GPU runs its share
const columns = [
  ['eager1', (s) => losses(runs.eager1)[s]],
  ['graph1', (s) => losses(runs.graph1)[s]],
  ['host00', (s) => losses(runs.host00)[s]],
  ['nccl1g', (s) => losses(runs.nccl1graph)[s]],
  ['nccl01', (s) => losses(runs.nccl01)[s]],
  ['r0', (s) => runs.nccl01?.ranks?.[0]?.epochs[0]?.losses[s]],
  ['r1', (s) => runs.nccl01?.ranks?.[1]?.epochs[0]?.losses[s]],
  ['nccl01g', (s) => losses(runs.nccl01graph)[s]],
  ['g r0', (s) => runs.nccl01graph?.ranks?.[0]?.epochs[0]?.losses[s]],
  ['g r1', (s) => runs.nccl01graph?.ranks?.[1]?.epochs[0]?.losses[s]],
];
const cell = (v) => (v === undefined ? '-' : v.toFixed(6)).padStart(10);
console.log(`\nstep ${columns.map(([n]) => n.padStart(10)).join(' ')}   (r0, r1: each rank's share of the step's loss)`);
for (const s of shown) console.log(`${String(s).padStart(4)} ${columns.map(([, f]) => cell(f(s))).join(' ')}`);

// each comparison: the largest relative difference, where, and the first 5 steps'
let bad = 0;
const compare = (label, x, ref, gate) => {
  const a = losses(x),
    b = losses(ref);
  if (a.length === 0 || b.length === 0) {
    console.log(`${label}: no result`);
    if (gate) bad++;
    return;
  }
  let worst = 0,
    at = -1;
  b.forEach((l, s) => {
    const r = rel(a[s], l);
    if (!(r <= worst)) [worst, at] = [r, s];
  });
  const first = b.slice(0, 5).map((l, s) => rel(a[s], l));
  const ok = first.every((r) => r < 1e-5);
  if (gate && !ok) bad++;
  console.log(
    `${ok ? 'ok  ' : 'OFF '} ${label}: first 5 steps ${first.map((r) => r.toExponential(1)).join(' ')}; ` +
      `largest ${worst.toExponential(2)} at step ${at}; mean loss ${rel(x.epochs[0].loss, ref.epochs[0].loss).toExponential(2)}; ` +
      `accuracy ${x.epochs[0].accuracy.toFixed(4)} vs ${ref.epochs[0].accuracy.toFixed(4)}, train ${x.epochs[0].trainAccuracy.toFixed(4)} vs ${ref.epochs[0].trainAccuracy.toFixed(4)}`,
  );
};
console.log('');
compare('1 device captured vs eager', runs.graph1, runs.eager1, false);
compare('2 host ranks on cuda:0 vs 1 device (data parallel, no NCCL, no second device)', runs.host00, runs.eager1, true);
compare('1 NCCL rank captured vs 1 device captured (captured all-reduce)', runs.nccl1graph, runs.graph1, true);
compare('2 NCCL ranks cuda:0,1 eager vs 1 device (the devices)', runs.nccl01, runs.eager1, true);
compare('2 NCCL ranks cuda:0,1 captured vs 1 device captured (the graphs over 2 ranks)', runs.nccl01graph, runs.graph1, true);
compare('2 NCCL ranks cuda:0,1 captured vs eager', runs.nccl01graph, runs.nccl01, false);

// the step losses' bookkeeping: a rank's share of a full step is never 0, and not one value for every step
for (const [name, r] of [
  ['eager', runs.nccl01],
  ['captured', runs.nccl01graph],
]) {
  for (const k of r?.ranks ?? []) {
    const l = k.epochs[0].losses;
    const zeros = l.filter((v) => v === 0).length;
    console.log(
      `2 NCCL ranks ${name}, rank ${k.rank} on ${k.device}: ${zeros} of ${l.length} step shares are 0, ${new Set(l).size} distinct; ` +
        `its train accuracy ${k.epochs[0].trainAccuracy.toFixed(4)}, validation ${k.epochs[0].accuracy.toFixed(4)}`,
    );
    if (zeros > 0) bad++;
  }
}
process.exit(bad > 0 ? 1 : 0);
