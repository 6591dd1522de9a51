import { spawnSync } from 'node:child_process';
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
  });

  it('info --json is machine-readable and says which strategies can run here', () => {
    const r = run('info', '--json');
    expect(r.status).toBe(0);
    const info = JSON.parse(r.stdout);
    expect(info.strategies.find((s: { name: string }) => s.name === 'host').available).toBe(true);
    expect(info.strategies.find((s: { name: string }) => s.name === 'pool').available).toBe(true);
    expect(info.devices.length > 0).toBe(info.strategies.find((s: { name: string }) => s.name === 'cuda').available);
  });

  it('loads extra plug-ins named in GPUMEM_PLUGINS', () => {
    const arena = fileURLToPath(new URL('../../../examples/dist/arena/index.js', import.meta.url));
    const r = spawnSync(process.execPath, [cli, 'info'], { encoding: 'utf8', env: { ...process.env, GPUMEM_PLUGINS: arena } });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^  arena /m);
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
