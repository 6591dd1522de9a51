import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { nodeTooOld } from './node-version.js';

const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };

describe("Node.js's floor", () => {
  it('says which Node.js is needed when the running one is older than the floor, and nothing otherwise', () => {
    expect(nodeTooOld('20.19.0', '>=22.12.0')).toBe(
      'gpumem needs Node.js 22.12.0 or later (this is 20.19.0); install a newer Node.js, e.g. the current LTS',
    );
    expect(nodeTooOld('22.11.9', '>=22.12.0')).toMatch(/needs Node\.js 22\.12\.0 or later \(this is 22\.11\.9\)/);
    expect(nodeTooOld('22.12.0', '>=22.12.0')).toBeUndefined();
    expect(nodeTooOld('v24.1.0', '>=22.12.0')).toBeUndefined();
    expect(nodeTooOld('22.13.0-pre', '>= 22.12.0')).toBeUndefined();
  });

  it('refuses a range or version it cannot read with a TypeError naming it', () => {
    expect(() => nodeTooOld('22.12.0', '^22.12.0')).toThrow(new TypeError("engines.node must be '>=MAJOR.MINOR.PATCH', got '^22.12.0'"));
    expect(() => nodeTooOld('lts', '>=22.12.0')).toThrow(TypeError);
  });

  it('the CLI stops with one line and status 1 on a Node.js older than its engines floor', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpumem-node-floor-'));
    const preload = join(dir, 'node-20.cjs');
    writeFileSync(preload, "Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '20.19.0' } });\n");
    const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
    const old = spawnSync(process.execPath, ['--require', preload, cli, 'info'], { encoding: 'utf8' });
    expect(old.status).toBe(1);
    expect(old.stdout).toBe('');
    expect(old.stderr).toBe(`${nodeTooOld('20.19.0', manifest.engines.node)}\n`);
    // this Node.js passes
    const now = spawnSync(process.execPath, [cli, '--version'], { encoding: 'utf8' });
    expect(now.status, now.stderr).toBe(0);
  });
});
