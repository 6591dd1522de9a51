// The mlp data parallel over two host ranks on one GPU against train(), each twice: per-step
// relative differences of the losses (MNIST, 12,800 images, one epoch, 200 steps). Run as
// `node bench/gpu/diag-mlp-ranks.mjs` from the project root (bench/gpu/suite.sh's devices suite).
import { builtInStrategyPackages } from '@gpumem/compare';
for (const m of builtInStrategyPackages) await import(m);
const { train, trainDistributed } = await import('@gpumem/gnn');
const imports = [...builtInStrategyPackages];
const mlp = { model: 'mlp', allocator: 'pool', epochs: 1, trainSubset: 12800, testSubset: 2000 };
const a = train(mlp),
  b = train(mlp);
const c = await trainDistributed({ ...mlp, imports, devices: [0, 0], communicator: 'host' });
const d = await trainDistributed({ ...mlp, imports, devices: [0, 0], communicator: 'host' });
const e = await trainDistributed({ ...mlp, imports, devices: 1 });
const diff = (x, y) => {
  let m = 0,
    at = -1;
  x.epochs[0].losses.forEach((l, s) => {
    const r = Math.abs(l - y.epochs[0].losses[s]) / Math.abs(y.epochs[0].losses[s]);
    if (r > m) {
      m = r;
      at = s;
    }
  });
  return `${m.toExponential(2)} at step ${at} (loss ${y.epochs[0].losses[at]?.toFixed(5)})`;
};
console.log('train vs train', diff(a, b));
console.log('2 host ranks vs 2 host ranks', diff(c, d));
console.log('2 host ranks vs train', diff(c, a));
console.log('1 nccl rank vs train', diff(e, a));
console.log(
  'first 5 steps 2r vs train',
  c.epochs[0].losses
    .slice(0, 5)
    .map((l, s) => (Math.abs(l - a.epochs[0].losses[s]) / a.epochs[0].losses[s]).toExponential(1))
    .join(' '),
);
console.log(
  'steps 50,100,150,199',
  [50, 100, 150, 199]
    .map((s) => (Math.abs(c.epochs[0].losses[s] - a.epochs[0].losses[s]) / a.epochs[0].losses[s]).toExponential(1))
    .join(' '),
);
console.log('mean loss', a.epochs[0].loss, c.epochs[0].loss, 'acc', a.epochs[0].accuracy, c.epochs[0].accuracy);
