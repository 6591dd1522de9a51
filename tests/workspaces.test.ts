/**
 * The root files that list the workspaces follow from them (scripts/sync-workspaces.mjs), and a
 * strategy package is found by its package.json field alone: by the conformance suite's list
 * (tests/allocators.ts), by compare's defaults when compare depends on it, by the vitest aliases.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { builtInStrategyPackages } from '@gpumem/compare';
import { platformPackages, publishedPackages } from '../scripts/published-packages.mjs';
import { strategyPackages, syncWorkspaces, workspacePackages } from '../scripts/sync-workspaces.mjs';
import { testTime } from './time-budget.js';

const repository = fileURLToPath(new URL('..', import.meta.url));
const script = join(repository, 'scripts', 'sync-workspaces.mjs');
const execFileAsync = promisify(execFile);

describe('files made from the workspaces', () => {
  it('tsconfig.json references every workspace with a tsconfig.json (node scripts/sync-workspaces.mjs rewrites it)', () => {
    expect(syncWorkspaces(repository, { check: true })).toEqual([]);
    const references = JSON.parse(readFileSync(join(repository, 'tsconfig.json'), 'utf8')).references.map((r: { path: string }) => r.path);
    expect(references).toContain('packages/allocator-pinned');
    expect(references).toContain('packages/distributed');
    expect(references).toContain('examples');
  });

  it('every strategy package is a workspace taking the core as a peer (one registry), and compare imports its strategy dependencies', () => {
    const strategies = strategyPackages().map((w) => w.name);
    expect(strategies).toEqual(
      expect.arrayContaining(['@gpumem/allocator-uvm', '@gpumem/allocator-pool', '@gpumem/allocator-pinned', '@gpumem/allocator-tiered']),
    );
    for (const w of strategyPackages()) {
      expect(w.manifest.peerDependencies, w.name).toHaveProperty(['@gpumem/allocator-core']);
    }
    const compare = workspacePackages().find((w) => w.name === '@gpumem/compare')!;
    const compareDependencies = Object.keys(compare.manifest.dependencies as Record<string, string>);
    expect([...builtInStrategyPackages]).toEqual(compareDependencies.filter((d) => strategies.includes(d)));
  });
});

describe('what a published package says of where it comes from', () => {
  const published = publishedPackages();

  it('every public package has a homepage and a repository pointing at its folder', () => {
    expect(published.map((w) => w.name)).toEqual(expect.arrayContaining(['@gpumem/allocator-core', '@gpumem/native', '@gpumem/cli']));
    for (const { name, dir, manifest } of published) {
      expect(manifest.repository, name).toEqual({ type: 'git', url: 'git+https://github.com/gpumem/gpumem.git', directory: dir });
      expect(manifest.homepage, name).toBe(`https://github.com/gpumem/gpumem/tree/main/${dir}#readme`);
    }
  });

  it("every public package's README links absolutely, so its links work from node_modules and the registry's page", () => {
    for (const { name, dir } of published) {
      const readme = readFileSync(join(repository, dir, 'README.md'), 'utf8');
      const relative = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((target) => !/^(https?:|mailto:|#)/.test(target));
      expect(relative, name).toEqual([]);
    }
  });
});

describe('what a published package holds and asks of the machine it installs on', () => {
  const published = workspacePackages().filter((w) => !w.manifest.private);

  it('every public package exports ./package.json (or has no exports map, so every file is reachable)', () => {
    const require = createRequire(join(repository, 'package.json'));
    for (const { name, dir, manifest } of published) {
      if (manifest.exports !== undefined)
        expect((manifest.exports as Record<string, unknown>)['./package.json'], name).toBe('./package.json');
      expect(realpathSync(require.resolve(`${name}/package.json`)), name).toBe(realpathSync(join(repository, dir, 'package.json')));
    }
  });

  it('every published package has keywords, and takes the others at a range that accepts their patch releases', () => {
    for (const { name, manifest } of publishedPackages()) {
      expect(Array.isArray(manifest.keywords) && (manifest.keywords as string[]).includes('gpumem'), name).toBe(true);
      for (const field of ['dependencies', 'peerDependencies', 'devDependencies'] as const) {
        for (const [dependency, range] of Object.entries((manifest[field] ?? {}) as Record<string, string>)) {
          if (dependency.startsWith('@gpumem/')) expect(range, `${name} ${field} ${dependency}`).toMatch(/^\^\d+\.\d+\.\d+$/);
        }
      }
    }
  });

  it("the prebuilt addon comes in platform packages that npm picks by os, cpu and libc: @gpumem/native's optional dependencies, at its own version, with no install script", () => {
    const native = published.find((w) => w.name === '@gpumem/native')!.manifest;
    const platforms = platformPackages();
    expect(platforms.map((p) => p.name)).toContain('@gpumem/native-linux-x64-gnu');
    expect(native.optionalDependencies).toEqual(Object.fromEntries(platforms.map((p) => [p.name, native.version])));
    for (const { name, dir, manifest } of platforms) {
      const [, os, cpu, libc] = /^@gpumem\/native-([a-z0-9]+)-([a-z0-9]+)(?:-(gnu|musl))?$/.exec(name) ?? [];
      expect(manifest.os, name).toEqual([os]);
      expect(manifest.cpu, name).toEqual([cpu]);
      expect(manifest.libc, name).toEqual(libc ? [libc === 'gnu' ? 'glibc' : 'musl'] : undefined);
      expect(manifest.version, name).toBe(native.version);
      expect(manifest.main, name).toBe('gpumem.node');
      expect(dir, name).toBe(`native/npm/${name.replace('@gpumem/native-', '')}`);
      expect(Object.keys((manifest.scripts ?? {}) as Record<string, string>), name).toEqual(['prepack']);
    }
    for (const { name, manifest } of publishedPackages()) {
      const scripts = (manifest.scripts ?? {}) as Record<string, string>;
      expect([scripts.preinstall, scripts.install, scripts.postinstall], name).toEqual([undefined, undefined, undefined]);
    }
  });

  it('no public workspace is held to an os, cpu or libc, nor makes every user install the build tools', () => {
    for (const { name, manifest } of published) {
      expect([manifest.os, manifest.cpu, manifest.libc], name).toEqual([undefined, undefined, undefined]);
    }
    const native = published.find((w) => w.name === '@gpumem/native')!.manifest;
    expect(native.dependencies ?? {}).toEqual({});
    expect(Object.keys(native.peerDependencies as Record<string, string>).sort()).toEqual(['cmake-js', 'node-addon-api']);
    expect(native.peerDependenciesMeta).toEqual({ 'cmake-js': { optional: true }, 'node-addon-api': { optional: true } });
    // the repository's own build still finds them, and the glibc 2.17 libraries its portable link uses (native/cmake/portable.cmake)
    expect(Object.keys(native.devDependencies as Record<string, string>).sort()).toEqual([
      '@napi-rs/cross-toolchain-x64-target-x86_64',
      'cmake-js',
      'node-addon-api',
    ]);
  });

  it(
    'no tarball carries tests, test helpers (*.testing.*) or TypeScript configs',
    async () => {
      const { stdout } = await execFileAsync(
        'npm',
        ['pack', '--dry-run', '--json', '--ignore-scripts', ...published.flatMap((w) => ['-w', w.dir])],
        { cwd: repository, encoding: 'utf8', maxBuffer: 1 << 26 },
      );
      const packs = JSON.parse(stdout) as { name: string; files: { path: string }[] }[];
      expect(packs.map((p) => p.name).sort()).toEqual(published.map((w) => w.name).sort());
      for (const pack of packs) {
        const paths = pack.files.map((f) => f.path);
        expect(
          paths.filter((path) => /\.test\.|\.testing\.|(^|\/)tsconfig[^/]*\.json$|\.tsbuildinfo$/.test(path)),
          pack.name,
        ).toEqual([]);
      }
    },
    testTime(120_000),
  );
});

describe('scripts/sync-workspaces.mjs on a repository of its own', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  function write(path: string, value: unknown): void {
    mkdirSync(join(dir!, path, '..'), { recursive: true });
    writeFileSync(join(dir!, path), typeof value === 'string' ? value : JSON.stringify(value));
  }

  it('finds a new package under a workspace pattern, says the references are stale, and rewrites them', () => {
    dir = mkdtempSync(join(tmpdir(), 'gpumem-workspaces-'));
    write('package.json', { name: 'root', private: true, workspaces: ['packages/*', 'tool'] });
    write('packages/b/package.json', { name: '@x/b' });
    write('packages/b/tsconfig.json', {});
    write('packages/a/package.json', { name: '@x/a', gpumem: { strategy: true } });
    write('packages/a/tsconfig.json', {});
    write('packages/notes/README.md', 'not a package');
    write('tool/package.json', { name: 'tool' }); // no tsconfig.json: not referenced
    expect(workspacePackages(dir).map((w) => w.dir)).toEqual(['packages/a', 'packages/b', 'tool']);
    expect(strategyPackages(dir).map((w) => w.name)).toEqual(['@x/a']);

    // The command works on the repository it sits in: a copy of it in this one.
    write('scripts/sync-workspaces.mjs', readFileSync(script, 'utf8'));
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [join(dir!, 'scripts', 'sync-workspaces.mjs'), ...args], { cwd: tmpdir(), encoding: 'utf8' });
    const stale = run('--check');
    expect(stale.status).toBe(1);
    expect(stale.stderr).toContain('Out of date with the workspaces: tsconfig.json (run node scripts/sync-workspaces.mjs)');
    expect(syncWorkspaces(dir, { check: true })).toEqual(['tsconfig.json']);
    expect(syncWorkspaces(dir)).toEqual(['tsconfig.json']);
    expect(JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8'))).toEqual({
      files: [],
      references: [{ path: 'packages/a' }, { path: 'packages/b' }],
    });
    expect(syncWorkspaces(dir, { check: true })).toEqual([]);

    write('packages/c/package.json', { name: '@x/c' });
    write('packages/c/tsconfig.json', {});
    expect(run('--check').status).toBe(1);
    expect(run().stdout).toBe('Rewrote tsconfig.json\n');
    expect(run('--check').stdout).toBe('Up to date with the workspaces\n');
    expect(JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8')).references).toEqual([
      { path: 'packages/a' },
      { path: 'packages/b' },
      { path: 'packages/c' },
    ]);
  });
});
