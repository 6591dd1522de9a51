import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The built CLI, as a user runs it (npm ci builds it).
const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });

describe('gpumem CLI', () => {
  it('info lists the machine, every registered strategy (plug-ins included) and the libraries', () => {
    const r = run('info');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/gpumem native core: built (with|WITHOUT) CUDA/);
    expect(r.stdout).toMatch(/devices: /);
    for (const name of ['cuda', 'host', 'uvm', 'pool', 'async']) expect(r.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    expect(r.stdout).toMatch(/libcublas\.so\.13 +(loadable|not loadable)/);
    // The strategies with the registry's sleep flag, after the list.
    expect(r.stdout).toContain('\n  sleep and wake by tag: expandable, tiered\n');
  });

  it('info --json is machine-readable and says which strategies can run here', () => {
    const r = run('info', '--json');
    expect(r.status).toBe(0);
    const info = JSON.parse(r.stdout);
    expect(info.strategies.find((s: { name: string }) => s.name === 'host').available).toBe(true);
    expect(info.strategies.find((s: { name: string }) => s.name === 'pool').available).toBe(true);
    expect(info.devices.length > 0).toBe(info.strategies.find((s: { name: string }) => s.name === 'cuda').available);
    const sleeping = info.strategies.filter((s: { sleep: boolean }) => s.sleep).map((s: { name: string }) => s.name);
    expect(sleeping).toEqual(['expandable', 'tiered']);
  });

  it('loads extra plug-ins named in GPUMEM_PLUGINS', () => {
    const arena = fileURLToPath(new URL('../../../examples/dist/arena/index.js', import.meta.url));
    const r = spawnSync(process.execPath, [cli, 'info'], { encoding: 'utf8', env: { ...process.env, GPUMEM_PLUGINS: arena } });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^ {2}arena /m);
    const bad = spawnSync(process.execPath, [cli, 'info'], { encoding: 'utf8', env: { ...process.env, GPUMEM_PLUGINS: 'no-such-plugin' } });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/could not load allocator plug-in 'no-such-plugin'/);
  });

  it('help, and bad usage exits 2 naming the problem', () => {
    expect(run('--help').stdout).toMatch(/Usage: gpumem/);
    expect(run('--help').status).toBe(0);
    const none = run();
    expect(none.status).toBe(2);
    const bad = run('frobnicate');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/unknown command 'frobnicate'/);
    const badFlag = run('info', '--yaml');
    expect(badFlag.status).toBe(2);
    expect(badFlag.stderr).toMatch(/unknown option '--yaml'.*--json/);
  });
});

describe('gpumem train', () => {
  it('trains and prints a table per epoch, and writes JSON', () => {
    const json = `${process.env.TMPDIR ?? '/tmp'}/gpumem-train-${process.pid}.json`;
    const r = run(
      'train',
      '--model',
      'mlp',
      '--allocator',
      'host',
      '--train-subset',
      '640',
      '--test-subset',
      '200',
      '--hidden',
      '32',
      '--epochs',
      '2',
      '--json',
      json,
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/mlp on mnist, allocator 'host' \(host\)/);
    expect(r.stdout).toMatch(/epoch +time +loss +train acc +test acc +peak allocated +peak reserved +upstream calls/);
    expect(r.stdout.match(/^[12] +\d+\.\d ms/gm)).toHaveLength(2);
    const result = JSON.parse(readFileSync(json, 'utf8'));
    expect(result.epochs).toHaveLength(2);
    expect(result.epochs[0].losses).toHaveLength(10);
  });

  it('trains the gcn on an SBM graph', () => {
    const r = run('train', '--model', 'gcn', '--dataset', 'sbm', '--allocator', 'pool', '--nodes', '400', '--epochs', '3', '--hidden', '8');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/gcn on sbm, allocator 'pool'/);
  });

  it('names the flag and the accepted values on bad input, with exit code 2', () => {
    const bad = run('train', '--model', 'lstm');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/'--model' must be one of mlp, gcn, transformer \(received 'lstm'\)/);
    const unknown = run('train', '--nodez', '5');
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toBe('gpumem train: unknown flag --nodez (did you mean --nodes?)\nsee gpumem train --help\n');
    const notInt = run('train', '--model', 'gcn', '--nodes', '1e12');
    expect(notInt.status).toBe(2);
    expect(notInt.stderr).toMatch(/'--nodes' must be at most 2147483647/);
    const noAlloc = run('train', '--allocator', 'nope');
    expect(noAlloc.status).toBe(2);
    expect(noAlloc.stderr).toMatch(/registered/);
    expect(run('train', '--help').stdout).toMatch(/Examples:/);
  });
});
