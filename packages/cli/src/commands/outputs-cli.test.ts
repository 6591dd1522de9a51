/**
 * What the commands write, as a user runs them: a device node is never replaced, a hard link's
 * other name keeps its bytes and a file its mode, a plug-in is never overwritten by an output, and
 * a full disk leaves the previous trace whole with an error naming the file.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { isRoot, leftovers, notRoot, smallTmpfs } from '../../../../tests/output-fixtures.js';

// The built CLI, as a user runs it (npm ci builds it).
const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const rmmSample = fileURLToPath(new URL('../../../trace/src/fixtures/rmm-sample.csv', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-cli-outputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const run = (args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', cwd: dir });
const tiny = ['--model', 'mlp', '--allocator', 'host', '--train-subset', '256', '--test-subset', '128', '--hidden', '32'];

describe('outputs of the commands', () => {
  it.skipIf(!isRoot)(`a character device given as an output is refused and stays a device${notRoot}`, () => {
    const device = join(dir, 'f');
    execFileSync('mknod', [device, 'c', '1', '7']);
    for (const args of [
      ['replay', rmmSample, '--allocators', 'host', '--json', device],
      ['replay', rmmSample, '--allocators', 'host', '--report', device],
      ['train', ...tiny, '--json', device],
      ['record', '--out', device, '--format', 'jsonl', ...tiny],
    ]) {
      const r = run(args);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/'--(json|report|out)' .*f: is a character device/);
      expect(statSync(device).isCharacterDevice()).toBe(true);
    }
  });

  it('record --out through a hard link writes a new file: the other name keeps its bytes, the mode is kept', () => {
    const precious = join(dir, 'precious');
    const link = join(dir, 'hl.jsonl');
    writeFileSync(precious, 'precious\n');
    linkSync(precious, link);
    chmodSync(link, 0o600);
    const r = run(['record', '--out', link, ...tiny]);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(precious, 'utf8')).toBe('precious\n');
    expect(JSON.parse(readFileSync(link, 'utf8').split('\n')[0]!)).toMatchObject({ format: 'gpumem-trace' });
    expect(statSync(link).mode & 0o777).toBe(0o600);
    expect(statSync(link).ino).not.toBe(statSync(precious).ino);
    expect(leftovers(dir)).toEqual([]);
  });

  it('an output that is a plug-in (its file, or a plug-in folder main module) is refused', () => {
    const plugin = join(dir, 'p.js');
    writeFileSync(plugin, 'export {};\n');
    const folder = join(dir, 'plugin-folder');
    mkdirSync(folder);
    writeFileSync(join(folder, 'package.json'), JSON.stringify({ name: 'p', type: 'module', main: 'main.js' }));
    writeFileSync(join(folder, 'main.js'), 'export {};\n');
    for (const args of [
      ['replay', rmmSample, '--allocators', 'host', '--plugin', './p.js', '--json', './p.js'],
      ['replay', rmmSample, '--allocators', 'host', '--plugin', './plugin-folder', '--json', './plugin-folder/main.js'],
      ['record', '--out', './p.js', '--format', 'jsonl', '--plugin', './p.js', ...tiny],
    ]) {
      const r = run(args);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/is the plug-in .*(p|main)\.js: writing it would overwrite the input/);
    }
    expect(readFileSync(plugin, 'utf8')).toBe('export {};\n');
    expect(readFileSync(join(folder, 'main.js'), 'utf8')).toBe('export {};\n');
  });

  // A real full disk: a 16 KiB tmpfs.
  const { folder: full, mounted, skipNote: noMount } = smallTmpfs(dir, '16k');

  it.skipIf(!mounted)(`record --out on a full disk names the file and keeps the previous trace whole${noMount}`, () => {
    const out = join(full, 'run.jsonl');
    writeFileSync(out, 'previous trace\n');
    const r = run(['record', '--out', out, ...tiny]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/cannot write ".*run\.jsonl": writing failed \(ENOSPC: .*\); its previous content is kept/);
    expect(readFileSync(out, 'utf8')).toBe('previous trace\n');
    expect(readdirSync(full)).toEqual(['run.jsonl']);
  });
});
