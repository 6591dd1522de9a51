/**
 * The command line's rough edges, through the built CLI on the CPU path: flag errors of one form
 * with "did you mean", everything checked before any work (allocator specs, --devices, outputs that
 * would overwrite an input or each other, read-only files), --json - on every command, tables that
 * fit 120 columns, help per command, one name per workload and one set of marks, plug-ins saying
 * where they were loaded from, and the allocation benchmark (npm run bench).
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { plainCompareHeader } from '../../compare/src/compare-table.testing.js';
import { readTable } from '../../compare/src/text-table.testing.js';
import { testTime } from '../../../tests/time-budget.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const root = fileURLToPath(new URL('../../../', import.meta.url));
const core = fileURLToPath(new URL('../../allocator-core/dist/index.js', import.meta.url));
const rmmSample = fileURLToPath(new URL('../../trace/src/fixtures/rmm-sample.csv', import.meta.url));
const baselineFile = fileURLToPath(new URL('../../compare/src/fixtures/torch-eager.jsonl', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-flags-'));
const env = { ...process.env, CUDA_VISIBLE_DEVICES: '', GPUMEM_PLUGINS: '' };
const gpu =
  spawnSync(
    process.execPath,
    ['-e', `import(${JSON.stringify(pathToFileURL(core).href)}).then((c) => process.exit(c.hasCudaDevice() ? 0 : 1))`],
    { env: process.env },
  ).status === 0;
const run = (args: string[], options: { cwd?: string; uid?: number; gid?: number } = {}): SpawnSyncReturns<string> =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: testTime(120_000), env, ...options });
const tiny = ['--train-subset', '256', '--test-subset', '128', '--hidden', '32', '--hidden-layers', '1'];

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Exit 2 with nothing on stdout (no work began) and a message on stderr matching `message`. */
function refused(r: SpawnSyncReturns<string>, message: RegExp): void {
  expect(r.stderr).toMatch(message);
  expect(r.status, r.stderr).toBe(2);
  expect(r.stdout).toBe('');
}

describe('flag errors: one form, with did you mean', () => {
  it('an unknown flag names the closest one and the help, not every flag', () => {
    const r = run(['compare', '--alocators', 'pool']);
    expect(r.stderr).toBe('gpumem compare: unknown flag --alocators (did you mean --allocators?)\nsee gpumem compare --help\n');
    expect(r.status).toBe(2);
    expect(run(['replay', rmmSample, '--zzz']).stderr).toBe('gpumem replay: unknown flag --zzz\nsee gpumem replay --help\n');
  });

  it('a misspelt allocator or choice gets did you mean', () => {
    refused(
      run(['train', '--allocator', 'pol']),
      /^gpumem train: '--allocator' names 'pol', which is not registered \(did you mean pool\?\)/,
    );
    refused(
      run(['record', '--out', join(dir, 'x.jsonl'), '--allocator', 'hots']),
      /^gpumem record: '--allocator' names 'hots', which is not registered \(did you mean host\?\)/,
    );
    refused(
      run(['compare', '--allocators', 'host,asyncc']),
      /^gpumem compare: '--allocators' names 'asyncc', which is not registered \(did you mean async\?\)/,
    );
    refused(
      run(['replay', rmmSample, '--allocators', 'expandible']),
      /^gpumem replay: '--allocators' names 'expandible', which is not registered \(did you mean expandable\?\)/,
    );
    refused(
      run(['train', '--model', 'mpl']),
      /^gpumem train: '--model' must be one of mlp, gcn, transformer \(received 'mpl'\) \(did you mean mlp\?\)/,
    );
  });

  it.skipIf(gpu)('train --allocator cuda without a GPU is a usage error of the same form', () => {
    refused(
      run(['train', '--allocator', 'cuda']),
      /^gpumem train: '--allocator' names 'cuda', which needs a CUDA device, and none is available here \(these run on the host: host, pool/,
    );
  });
});

describe('checked before any work (exit 2)', () => {
  it('every allocator spec, not only when its turn comes', () => {
    refused(
      run(['compare', ...tiny, '--allocators', 'host,pool:maxReservedBytes=abc']),
      /gpumem compare: '--allocators': an allocator spec was refused:\n {2}pool:maxReservedBytes=abc: Expected positive integer for maxReservedBytes/,
    );
    refused(
      run(['compare', ...tiny, '--inline', '--allocators', 'host,pool:bogus=1']),
      /pool:bogus=1: Unknown option 'bogus' for the 'pool' allocator/,
    );
    refused(
      run(['replay', rmmSample, '--allocators', 'host,pool:maxReservedBytes=abc']),
      /gpumem replay: '--allocators': an allocator spec was refused:\n {2}pool:maxReservedBytes=abc/,
    );
    refused(
      run(['train', ...tiny, '--allocator', 'pool:maxReservedBytes=abc']),
      /gpumem train: '--allocator': an allocator spec was refused/,
    );
    refused(
      run(['train', ...tiny, '--allocator', 'pool:maxReservedBytes=abc', '--devices', '2']),
      /gpumem train: '--allocator': an allocator spec was refused/,
    );
    refused(
      run(['compare', ...tiny, '--allocators', 'host,plugin']),
      /plugin: Expected a non-empty string \(the path of a gpumem plug-in library\) for library/,
    );
  });

  it('--devices against the batch or the nodes, before any rank is started', () => {
    refused(
      run(['compare', ...tiny, '--allocators', 'host', '--devices', '1000']),
      /gpumem compare: '--devices' 1000 ranks need a batch of at least 1000 .* the batch is 64/,
    );
    refused(
      run(['train', ...tiny, '--allocator', 'host', '--devices', '100', '--batch', '32']),
      /gpumem train: '--devices' 100 ranks need a batch of at least 100/,
    );
    refused(
      run(['compare', '--model', 'gcn', '--nodes', '10', '--allocators', 'host', '--devices', '8']),
      /'--devices' 8 ranks need at least one node each, but 10 nodes in rows of 2 leave the last rank none/,
    );
  });

  it('an output that would overwrite the input or another output', () => {
    const trace = join(dir, 'run.csv');
    writeFileSync(trace, readFileSync(rmmSample));
    refused(
      run(['replay', trace, '--report', trace]),
      /gpumem replay: '--report' .*run\.csv is the trace FILE: writing it would overwrite the input/,
    );
    refused(run(['replay', trace, '--json', join(dir, '.', 'run.csv')]), /'--json' .* is the trace FILE/);
    expect(readFileSync(trace, 'utf8')).toBe(readFileSync(rmmSample, 'utf8'));
    const same = join(dir, 'same.out');
    refused(
      run(['replay', trace, '--json', same, '--report', same]),
      /gpumem replay: '--report' and '--json' both name .*same\.out: one would overwrite the other/,
    );
    refused(run(['compare', ...tiny, '--json', same, '--trace-json', same]), /gpumem compare: '--json' and '--trace-json' both name/);
    refused(
      run(['compare', ...tiny, '--baseline', baselineFile, '--report', baselineFile]),
      /'--report' .* is the baseline file given to '--baseline'/,
    );
    refused(run(['record', ...tiny, '--out', same, '--format', 'jsonl', '--json', same]), /gpumem record: '--out' and '--json' both name/);
  });

  // root writes any file, so the CLI runs as 'nobody' there: that needs a Node.js binary 'nobody' may
  // run (not so for one under root's home, e.g. `npx -p node@24`)
  const asOther = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
  const cannotRunAsOther =
    'uid' in asOther && spawnSync(process.execPath, ['-e', '0'], asOther).status !== 0
      ? `'nobody' cannot run ${process.execPath}, so a file root cannot write cannot be made here`
      : undefined;
  if (cannotRunAsOther) console.warn(`skipped: an existing output file that cannot be written: ${cannotRunAsOther}`);

  it.skipIf(cannotRunAsOther !== undefined)('an existing output file that cannot be written', () => {
    const folder = join(dir, 'shared');
    mkdirSync(folder);
    chmodSync(dir, 0o755);
    chmodSync(folder, 0o777);
    const locked = join(folder, 'locked.json');
    writeFileSync(locked, '{}\n');
    chmodSync(locked, 0o444);
    refused(
      run(['train', ...tiny, '--allocator', 'host', '--json', locked], { cwd: folder, ...asOther }),
      /gpumem train: '--json' .*locked\.json: the file exists and cannot be written/,
    );
    refused(
      run(['replay', rmmSample, '--report', locked], { cwd: folder, ...asOther }),
      /gpumem replay: '--report' .*locked\.json: the file exists and cannot be written/,
    );
    expect(readFileSync(locked, 'utf8')).toBe('{}\n');
  });
});

describe('--json - (standard output)', () => {
  it('train, record, compare and replay write the JSON alone on stdout, the rest on stderr', () => {
    const trainRun = run(['train', ...tiny, '--allocator', 'host', '--json', '-']);
    expect(trainRun.status, trainRun.stderr).toBe(0);
    expect(JSON.parse(trainRun.stdout).epochs).toHaveLength(1);
    expect(trainRun.stderr).toMatch(/mlp on mnist, allocator 'host'/);
    const record = run(['record', ...tiny, '--allocator', 'host', '--out', join(dir, 'rec.jsonl'), '--json', '-']);
    expect(record.status, record.stderr).toBe(0);
    expect(JSON.parse(record.stdout).model).toBe('mlp');
    expect(record.stderr).toMatch(/^wrote .*rec\.jsonl \(jsonl\)$/m);
    const compare = run(['compare', ...tiny, '--epochs', '2', '--allocators', 'host', '--json', '-']);
    expect(compare.status, compare.stderr).toBe(0);
    expect(JSON.parse(compare.stdout).runs[0].allocator).toBe('host');
    expect(compare.stderr).toMatch(/^host +ok /m);
    const replay = run(['replay', rmmSample, '--allocators', 'host', '--repeat', '1', '--json', '-']);
    expect(replay.status, replay.stderr).toBe(0);
    expect(JSON.parse(replay.stdout).results[0].allocator).toBe('host');
    expect(replay.stderr).toMatch(/^trace /m);
    // /dev/stdout is standard output too: no status line inside the JSON
    const devStdout = run(['replay', rmmSample, '--allocators', 'host', '--repeat', '1', '--json', '/dev/stdout']);
    expect(devStdout.status, devStdout.stderr).toBe(0);
    expect(JSON.parse(devStdout.stdout).results).toHaveLength(1);
    refused(run(['compare', ...tiny, '--report', '-']), /'--report' must be a file name \('-', standard output, is for '--json'\)/);
  });
});

describe('one name for one thing', () => {
  it("replay's --repeats is --repeat, as in compare; the old name works with a deprecation note", () => {
    const r = run(['replay', rmmSample, '--allocators', 'host', '--repeats', '1']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/gpumem replay: '--repeats' is deprecated and will be removed in the next release; use '--repeat'/);
    const help = run(['replay', '--help']).stdout;
    expect(help).toMatch(/^ {2}--repeat N +timed passes over the trace/m);
    expect(help).toMatch(/^ {2}--repeats +deprecated: the old name of --repeat/m);
    expect(run(['compare', '--help']).stdout).toMatch(/^ {2}--repeat N /m);
  });

  it("compare's --baseline (PyTorch runs) was --peer, a word kept for GPU peer access; the old name works with a deprecation note", () => {
    const r = run(['compare', ...tiny, '--peer', '/no/such/baseline.jsonl']);
    expect(r.stderr).toMatch(/gpumem compare: '--peer' is deprecated and will be removed in the next release; use '--baseline'/);
    expect(r.stderr).toMatch(/'--baseline' \/no\/such\/baseline.jsonl:0: cannot read it/);
    const help = run(['compare', '--help']).stdout;
    expect(help).toMatch(/^ {2}--baseline S +comma-separated JSON-lines files of another framework's run/m);
    expect(help).toMatch(/^ {2}--peer +deprecated: the old name of --baseline/m);
  });

  it("the gcn's dataset 'random' was 'seed', a word kept for the random seed; the old name works with a deprecation note", () => {
    const r = run([
      'train',
      '--model',
      'gcn',
      '--dataset',
      'seed',
      '--allocator',
      'host',
      '--nodes',
      '300',
      '--epochs',
      '1',
      '--hidden',
      '8',
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /gpumem train: '--dataset seed' is deprecated and will be removed in the next release; use '--dataset random'/,
    );
    expect(r.stdout).toMatch(/^gcn on random, allocator 'host'/m);
    const help = run(['train', '--help']).stdout;
    expect(help).toMatch(/^ {2}--dataset [a-z|]*random\|sbm.*gcn: random \(default\) or sbm;.*deprecated: seed, the old name of random/m);
  });

  it('compare names the workload as train does, and marks bests the same way as the report (with a legend)', () => {
    const json = join(dir, 'marks.json');
    const report = join(dir, 'marks.html');
    const compare = run(['compare', ...tiny, '--epochs', '2', '--allocators', 'host,pool', '--json', json, '--report', report]);
    expect(compare.status, compare.stderr).toBe(0);
    expect(compare.stdout).toMatch(/^mlp on mnist \(hidden 32, batch 64, 256 training images\), 2 epochs, on host/m);
    expect(compare.stdout).not.toMatch(/mlp-seed/);
    expect(run(['train', ...tiny, '--allocator', 'host']).stdout).toMatch(/^mlp on mnist, /m);
    expect(compare.stdout).toMatch(/^\* best in its column; = tied for best/m);
    const html = readFileSync(report, 'utf8');
    expect(html).toContain('<span class="best-mark" title="best">*</span>');
    expect(html).toMatch(/<span class="tied-mark">=<\/span> marks the runs tied/);
    expect(html).not.toMatch(/\u2605|\u2248/);
  });
});

describe('tables', () => {
  it('fit 120 columns, repeating the name column, with figures right-aligned', () => {
    const r = run(['compare', ...tiny, '--epochs', '2', '--allocators', 'host,pool:upstream=host:maxReservedBytes=64MiB']);
    expect(r.status, r.stderr).toBe(0);
    const table = r.stdout.slice(r.stdout.indexOf('\n') + 1, r.stdout.indexOf('\n* best'));
    for (const line of table.split('\n')) expect(line.length).toBeLessThanOrEqual(120);
    const { header, rows } = readTable(r.stdout);
    expect(header).toEqual(plainCompareHeader('images/s'));
    expect([...rows.keys()]).toEqual(['host', 'pool:upstream=host:maxReservedBytes=64MiB']);
    // right-aligned: the header of a figure column ends where its figures end
    const lines = r.stdout.split('\n');
    const headerLine = lines.find((l) => l.includes('images/s'))!;
    const hostLine = lines.find((l) => l.startsWith('host ') && /\d/.test(l))!;
    const end = headerLine.indexOf('images/s') + 'images/s'.length;
    // a figure ends under the header's end, or two columns before it where the column has marks (' *', ' =')
    expect(hostLine.slice(end - 3, end)).toMatch(/[0-9]( [*=]| {2})$|[0-9]$/);
    expect(hostLine[end] ?? ' ').toBe(' ');
  });
});

describe('when no strategy could replay the trace', () => {
  it.skipIf(gpu)('says what happened to each, and keeps the errors out of the table', () => {
    const r = run(['replay', rmmSample, '--allocators', 'cuda,async', '--repeat', '1']);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^result:\n {2}no strategy could replay the trace: cuda and async: .*no CUDA device/m);
    expect(r.stdout).not.toMatch(/No strategy replayed the whole trace without running out of memory/);
    const { rows } = readTable(r.stdout);
    expect(rows.get('cuda')!.slice(1).filter(Boolean)).toEqual(['failed']);
    expect(r.stdout.match(/no CUDA device/g)).toHaveLength(1); // said once
    // one failed among others: listed under the table
    const some = run(['replay', rmmSample, '--allocators', 'cuda,host', '--repeat', '1']);
    expect(some.stdout).toMatch(/^ {2}failed: cuda: .*no CUDA device/m);
    for (const line of r.stdout.split('\n')) expect(line.length < 120 || !/^cuda /.test(line)).toBe(true);
  });
});

describe('help', () => {
  it("gpumem help COMMAND prints that command's help; the top-level help puts PyTorch snapshots first for replay", () => {
    for (const command of ['replay', 'compare', 'train', 'record']) {
      const r = run(['help', command]);
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: gpumem ${command} `));
    }
    const top = run(['--help']).stdout;
    expect(top).toMatch(/replay FILE +replay a program's allocations .* a PyTorch memory snapshot/s);
    expect(top).toMatch(/gpumem replay snapshot\.pickle/);
  });

  it("compare --help gives the epochs compare runs by default (3), not train's", () => {
    expect(run(['compare', '--help']).stdout).toMatch(/^ {2}--epochs N +epochs \(default 3;/m);
    expect(run(['train', '--help']).stdout).toMatch(/^ {2}--epochs N +epochs \(default 1\)/m);
  });

  it('compare --report says how to open it and what to try next', () => {
    const report = join(dir, 'next.html');
    const r = run(['compare', ...tiny, '--epochs', '2', '--allocators', 'host', '--report', report]);
    expect(r.status, r.stderr).toBe(0);
    const tail = r.stdout.trimEnd().split('\n').slice(-2);
    expect(tail[0]).toBe(`report: ${report} (open ${report} in a browser)`);
    expect(tail[1]).toMatch(/^next: .*gpumem replay snapshot\.pickle$/);
  });
});

describe('plug-ins', () => {
  it('say where each was loaded from: a package in a parent folder shadows the one meant', () => {
    const parent = join(dir, 'parent');
    const pkg = join(parent, 'node_modules', 'shadow-strategy');
    const project = join(parent, 'project');
    mkdirSync(pkg, { recursive: true });
    mkdirSync(project);
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({ name: 'shadow-strategy', version: '1.0.0', type: 'module', main: 'index.js' }),
    );
    writeFileSync(
      join(pkg, 'index.js'),
      `import { registerAllocator, HostAllocator } from ${JSON.stringify(pathToFileURL(core).href)};\nregisterAllocator('shadow', (o) => new HostAllocator(o), { description: 'from a parent folder', requiresCuda: false });\n`,
    );
    const r = run(['info', '--plugin', 'shadow-strategy'], { cwd: project });
    expect(r.stderr).toBe(`gpumem: plug-in 'shadow-strategy' loaded from ${join(pkg, 'index.js')}\n`);
    const help = run(['--help']).stdout;
    expect(help).toMatch(/node_modules folder in the current\s+directory or any folder above it comes first/);
    expect(help).toMatch(/GPUMEM_PLUGINS +comma-separated plug-ins to load, as --plugin \(resolved the same way\)/);
  });

  it('the strategy guide says the package.json snippet is merged, and where plug-ins resolve from', () => {
    const guide = readFileSync(join(root, 'docs/writing-a-strategy.md'), 'utf8');
    const fence = guide.indexOf('```json guide-file=package.json merge');
    expect(guide.slice(Math.max(0, fence - 300), fence)).toMatch(/\*\*Merge\*\* these fields into the package\.json/);
    expect(guide).toMatch(/`node_modules` folder of the current directory and of \*\*every folder above it\*\*/);
  });
});

describe('npm run bench (bench/alloc)', () => {
  it(
    'measures every strategy that ships with gpumem and can run here, tiered included, and skips plugin with a note',
    () => {
      const out = join(dir, 'alloc.json');
      const r = spawnSync(process.execPath, ['bench/alloc/run.js', '--quick', '--out', out], {
        cwd: root,
        encoding: 'utf8',
        env,
        timeout: testTime(300_000),
      });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/bench\/alloc: skipping plugin: needs options/);
      const labels = (JSON.parse(readFileSync(out, 'utf8')) as { rows: { allocator: string }[] }).rows.map((row) => row.allocator);
      expect(labels).toEqual(expect.arrayContaining(['host', 'tiered', 'pinned', 'expandable']));
      const tiered = spawnSync(process.execPath, ['bench/alloc/run.js', '--quick', '--allocators', 'tiered', '--out', out], {
        cwd: root,
        encoding: 'utf8',
        env,
        timeout: testTime(300_000),
      });
      expect(tiered.status, tiered.stderr).toBe(0);
      expect((JSON.parse(readFileSync(out, 'utf8')) as { rows: { allocator: string }[] }).rows.map((row) => row.allocator)).toEqual([
        'tiered',
      ]);
    },
    testTime(300_000),
  );
});
