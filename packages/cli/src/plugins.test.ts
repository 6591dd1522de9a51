/**
 * How `--plugin` and GPUMEM_PLUGINS find a plug-in's module: a file, a package folder (its
 * package.json's exports, main or index.js), or a package name from the current project; and what
 * they say when nothing loadable is there.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { PluginLoadError } from '@gpumem/compare';
import { afterAll, describe, expect, it } from 'vitest';
import { loadAllocatorPlugins, maxPluginModuleBytes, resolvePlugin } from './plugins.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-plugins-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A package folder under `dir` with `manifest` as its package.json and the given files. */
function packageAt(name: string, manifest: object | string | undefined, files: Record<string, string> = {}): string {
  const root = join(dir, name);
  mkdirSync(root, { recursive: true });
  if (manifest !== undefined) writeFileSync(join(root, 'package.json'), typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(join(root, file, '..'), { recursive: true });
    writeFileSync(join(root, file), text);
  }
  return root;
}

const url = (path: string) => pathToFileURL(path).href;
const module = 'export {};\n';

describe('resolvePlugin', () => {
  it('takes a module file by absolute or relative path', () => {
    const root = packageAt('by-file', undefined, { 'dist/index.js': module });
    expect(resolvePlugin(join(root, 'dist', 'index.js'))).toBe(url(join(root, 'dist', 'index.js')));
    expect(resolvePlugin('./by-file/dist/index.js', dir)).toBe(url(join(root, 'dist', 'index.js')));
  });

  it("takes a package folder by its package.json's exports, with Node's conditions for import", () => {
    const plain = packageAt(
      'exports-string',
      { name: 'exports-string', type: 'module', exports: './dist/index.js' },
      { 'dist/index.js': module },
    );
    expect(resolvePlugin(plain)).toBe(url(join(plain, 'dist', 'index.js')));
    expect(resolvePlugin('./exports-string', dir)).toBe(url(join(plain, 'dist', 'index.js')));
    const conditional = packageAt(
      'exports-conditions',
      {
        name: 'exports-conditions',
        exports: { '.': { types: './dist/index.d.ts', require: './dist/index.cjs', import: './dist/index.mjs' } },
      },
      { 'dist/index.mjs': module, 'dist/index.cjs': '' },
    );
    expect(resolvePlugin(conditional)).toBe(url(join(conditional, 'dist', 'index.mjs')));
  });

  it('takes a package folder by its main, or index.js without one, as Node does', () => {
    const main = packageAt('by-main', { name: 'by-main', main: 'lib/entry.js' }, { 'lib/entry.js': module });
    expect(resolvePlugin(main)).toBe(url(join(main, 'lib', 'entry.js')));
    const bare = packageAt('by-main-no-extension', { name: 'x', main: 'lib/entry' }, { 'lib/entry.js': module });
    expect(resolvePlugin(bare)).toBe(url(join(bare, 'lib', 'entry.js')));
    const index = packageAt('by-index', { name: 'by-index' }, { 'index.js': module });
    expect(resolvePlugin(index)).toBe(url(join(index, 'index.js')));
  });

  it('takes ./node_modules/NAME, a linked package folder', () => {
    const target = packageAt('linked-target', { name: 'my-strategy', exports: './dist/index.js' }, { 'dist/index.js': module });
    const project = packageAt('project', { name: 'project', private: true });
    mkdirSync(join(project, 'node_modules'));
    symlinkSync(target, join(project, 'node_modules', 'my-strategy'), 'dir');
    expect(resolvePlugin('./node_modules/my-strategy', project)).toBe(
      url(join(project, 'node_modules', 'my-strategy', 'dist', 'index.js')),
    );
  });

  it('says what is missing when nothing loadable is there', () => {
    expect(() => resolvePlugin(join(dir, 'nowhere'))).toThrow(`${join(dir, 'nowhere')} does not exist`);
    const empty = packageAt('no-manifest', undefined, { 'dist/index.js': module });
    expect(() => resolvePlugin(empty)).toThrow(/is a folder without a package\.json: give the plug-in's package folder or its module file/);
    const unbuilt = packageAt('unbuilt', { name: 'unbuilt', exports: './dist/index.js' });
    expect(() => resolvePlugin(unbuilt)).toThrow(
      /package\.json names '\.\/dist\/index\.js' as its module, which is not there \(is the plug-in built\?\)/,
    );
    const noMain = packageAt('no-entry', { name: 'no-entry', main: 'lib/entry.js' });
    expect(() => resolvePlugin(noMain)).toThrow(
      /names 'lib\/entry\.js' or 'lib\/entry\.js\.js' or 'lib\/entry\.js\/index\.js' or 'index\.js' as its module/,
    );
    const subpathsOnly = packageAt('subpaths-only', { name: 'subpaths-only', exports: { './arena': './a.js' } }, { 'a.js': module });
    expect(() => resolvePlugin(subpathsOnly)).toThrow(/its "exports" has no entry for the package itself \('\.'\)/);
    const broken = packageAt('broken-json', '{ "name": ');
    expect(() => resolvePlugin(broken)).toThrow(/package\.json is not valid JSON/);
  });

  it('resolves a package name from the current project, and hints at ./ when a folder of that name is there', () => {
    const project = packageAt('named-project', { name: 'named-project', private: true });
    packageAt('named-project/node_modules/my-named-strategy', { name: 'my-named-strategy', main: 'index.js' }, { 'index.js': module });
    expect(resolvePlugin('my-named-strategy', project)).toBe(url(join(project, 'node_modules', 'my-named-strategy', 'index.js')));
    packageAt('named-project/local-strategy', { name: 'local-strategy', main: 'index.js' }, { 'index.js': module });
    expect(() => resolvePlugin('local-strategy', project)).toThrow(
      new RegExp(
        `npm install local-strategy\\) or give its path\\. To load the folder or file ${join(project, 'local-strategy')}, write it as \\./local-strategy\\.`,
      ),
    );
  });
});

describe('loadAllocatorPlugins', () => {
  it('imports a plug-in given as a package folder and says which file it loaded', async () => {
    const root = packageAt(
      'loaded',
      { name: 'loaded', type: 'module', exports: './dist/index.js' },
      { 'dist/index.js': 'globalThis.gpumemPluginsTestLoaded = (globalThis.gpumemPluginsTestLoaded ?? 0) + 1;\n' },
    );
    const lines: string[] = [];
    const specifiers = await loadAllocatorPlugins([root], (line) => lines.push(line));
    expect((globalThis as { gpumemPluginsTestLoaded?: number }).gpumemPluginsTestLoaded).toBe(1);
    expect(specifiers).toEqual([url(join(root, 'dist', 'index.js'))]);
    expect(lines).toEqual([`gpumem: plug-in '${root}' loaded from ${join(root, 'dist', 'index.js')}`]);
    await expect(loadAllocatorPlugins([join(dir, 'unbuilt')], () => {})).rejects.toThrow(
      /^could not load allocator plug-in '.*unbuilt': .*is not there \(is the plug-in built\?\)/,
    );
  });
});

describe('a plug-in is read from regular files of bounded size', () => {
  /** The error resolvePlugin(name) throws. */
  const refusal = (name: string) => {
    try {
      resolvePlugin(name, dir);
    } catch (e) {
      return e as PluginLoadError;
    }
    return undefined;
  };

  it.skipIf(process.platform !== 'linux')(
    'refuses a device (GPUMEM_PLUGINS=/dev/zero read without end) and a FIFO, naming the plug-in',
    () => {
      const zero = refusal('/dev/zero');
      expect(zero).toBeInstanceOf(PluginLoadError);
      expect(zero?.code).toBe('ERR_PLUGIN_NOT_FILE');
      expect(zero?.message).toBe(
        "could not load allocator plug-in '/dev/zero': module /dev/zero is a character device, not a regular file",
      );
      const fifo = join(dir, 'plugin.mjs');
      expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
      expect(refusal(fifo)?.message).toMatch(/module .*plugin\.mjs is a named pipe \(FIFO\), not a regular file$/);
      const folder = packageAt('fifo-manifest', undefined, { 'index.js': module });
      expect(spawnSync('mkfifo', [join(folder, 'package.json')]).status).toBe(0);
      expect(refusal(folder)?.message).toMatch(/package\.json .*fifo-manifest\/package\.json is a named pipe \(FIFO\)/);
    },
  );

  it('refuses a module file larger than a plug-in may be', () => {
    const big = join(dir, 'big.mjs');
    writeFileSync(big, module);
    truncateSync(big, maxPluginModuleBytes + 1); // sparse: nothing is written
    const e = refusal(big);
    expect(e?.code).toBe('ERR_PLUGIN_TOO_LARGE');
    expect(e?.message).toContain(`is ${maxPluginModuleBytes + 1} bytes, more than the ${maxPluginModuleBytes}`);
  });
});

describe('a plug-in whose loading never settles', () => {
  // The built CLI, as a user runs it (npm ci builds it).
  const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
  const never = join(dir, 'never.mjs');
  writeFileSync(never, 'await new Promise(() => {});\n');
  const info = (env: Record<string, string>) =>
    spawnSync(process.execPath, [cli, 'info'], { encoding: 'utf8', env: { ...process.env, GPUMEM_PLUGINS: never, ...env } });

  it('is an error naming the plug-in and the setting, exit 1 (it exited 0 having done nothing)', () => {
    const r = info({ GPUMEM_PLUGIN_TIMEOUT: '0.5' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `could not load allocator plug-in '${never}': its module did not finish loading within 0.5 s (a top-level await that never settles?); GPUMEM_PLUGIN_TIMEOUT=SECONDS allows it longer`,
    );
  });

  it('refuses a GPUMEM_PLUGIN_TIMEOUT that is not a positive number of seconds', () => {
    for (const bad of ['0', '-1', 'soon', '1e3']) {
      const r = info({ GPUMEM_PLUGIN_TIMEOUT: bad });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain('GPUMEM_PLUGIN_TIMEOUT must be a positive number of seconds');
    }
  });
});
