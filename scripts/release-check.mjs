#!/usr/bin/env node
// What a release would publish, built and checked as the registries would take it, and nothing
// published: `npm run release:check`.
//
//   node scripts/release-check.mjs [--out DIR] [--json FILE] [--no-build] [--no-python]
//
// 1. Builds every artifact: the addon and the TypeScript (`npm run build`; --no-build uses what is
//    built), each npm package with `npm publish --dry-run` (a platform package's prepack puts the
//    addon in it), the Python sdist (`setup.py sdist`, native sources inside) and, from the sdist
//    alone in an empty folder, the wheel (`pip wheel --no-deps --no-build-isolation`), as a user
//    without the repository would build it.
// 2. Checks each as its registry would: every npm package at the release's version (lerna.json),
//    with a licence, a README, keywords, a repository and public access, no install script, and
//    its dependencies on the others at ranges the release satisfies; the sdist's and the wheel's
//    metadata (name, version, licence, Requires-Python, classifiers, project URLs) and file names.
// 3. Prints what a maintainer would publish (registry, package, version, file, size) and the
//    commands; --json writes the same. Exits 1 naming every problem found.
//
// The wheel built here from the sdist is for this machine (linux_x86_64): outside the repository
// there is no glibc sysroot for the portable link (native/cmake/portable.cmake). The release
// workflow (.github/workflows/release.yml) builds the manylinux_2_28 wheel in the repository.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { publishedPackages, repository as repo } from './published-packages.mjs';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    json: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    'no-python': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write('usage: node scripts/release-check.mjs [--out DIR] [--json FILE] [--no-build] [--no-python]\n');
  process.exit(0);
}
const out = resolve(values.out ?? join(tmpdir(), 'gpumem-release-check'));
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const version = JSON.parse(readFileSync(join(repo, 'lerna.json'), 'utf8')).version;
const problems = [];
const problem = (what) => problems.push(what);
const step = (line) => process.stderr.write(`release-check: ${line}\n`);
const run = (command, args, options = {}) =>
  execFileSync(command, args, { cwd: repo, encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'inherit'], ...options });

if (!values['no-build']) {
  step('building the addon and the TypeScript (npm run build)');
  run('npm', ['run', 'build'], { stdio: ['ignore', 'inherit', 'inherit'] });
}

// --- npm --------------------------------------------------------------------------------------
const packages = publishedPackages(repo);
const names = new Set(packages.map((p) => p.name));
const artifacts = [];
for (const { dir, name, manifest } of packages) {
  step(`npm publish --dry-run ${name}`);
  const where = `${name} (${dir})`;
  if (manifest.version !== version) problem(`${where}: version ${manifest.version}, the release's is ${version} (lerna.json)`);
  if (!manifest.license) problem(`${where}: no license`);
  if (!Array.isArray(manifest.keywords) || manifest.keywords.length === 0) problem(`${where}: no keywords`);
  if (!manifest.repository?.url) problem(`${where}: no repository`);
  if (manifest.publishConfig?.access !== 'public')
    problem(`${where}: publishConfig.access is not 'public' (a scoped package would be private)`);
  for (const hook of ['preinstall', 'install', 'postinstall']) {
    if (manifest.scripts?.[hook]) problem(`${where}: an ${hook} script (npm 11 warns, pnpm 10 skips it)`);
  }
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
    for (const [dependency, range] of Object.entries(manifest[field] ?? {})) {
      if (!names.has(dependency)) continue;
      // The platform packages are pinned (the addon and the sources of one release go together); the rest take patch releases.
      const expected = field === 'optionalDependencies' ? version : `^${version}`;
      if (range !== expected) problem(`${where}: ${field} ${dependency}@${range}, expected ${expected}`);
    }
  }
  const dry = spawnSync('npm', ['publish', '--dry-run', '--json', '--tag', 'latest'], {
    cwd: join(repo, dir),
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  if (dry.status !== 0) {
    problem(`${where}: npm publish --dry-run failed (exit ${dry.status}):\n${dry.stderr.slice(-2000)}`);
    continue;
  }
  // npm prints the package's own JSON, or with workspaces a map of them; its scripts' output may precede it.
  const text = dry.stdout.slice(dry.stdout.indexOf('{'));
  const parsed = JSON.parse(text);
  const report = parsed.files ? parsed : parsed[name];
  const files = report.files.map((f) => f.path);
  for (const required of ['package.json', 'README.md', 'LICENSE']) {
    if (!files.includes(required)) problem(`${where}: the tarball has no ${required}`);
  }
  if (manifest.main && !files.includes(manifest.main.replace(/^\.\//, '')))
    problem(`${where}: main ${manifest.main} is not in the tarball`);
  artifacts.push({ registry: 'npm', name, version: report.version, file: report.filename, bytes: report.size, files: files.length });
}

// --- Python -------------------------------------------------------------------------------------
/** The fields of a METADATA / PKG-INFO file (RFC 822 headers before the description): name to values. */
function metadataFields(text) {
  const fields = {};
  for (const line of text.split('\n\n')[0].split('\n')) {
    const m = /^([A-Za-z-]+): (.*)$/.exec(line);
    if (!m) continue;
    fields[m[1]] ??= [];
    fields[m[1]].push(m[2]);
  }
  return fields;
}

/** The checks PyPI's metadata asks for and the project promises; `what` names the file in problems. */
function checkPythonMetadata(what, fields) {
  const one = (key) => fields[key]?.[0];
  if (one('Name') !== 'gpumem-torch') problem(`${what}: Name ${one('Name')}`);
  if (one('Version') !== version) problem(`${what}: Version ${one('Version')}, the release's is ${version}`);
  if (one('License-Expression') !== 'Apache-2.0' && one('License') !== 'Apache-2.0') problem(`${what}: no SPDX licence (Apache-2.0)`);
  if (!/^>=3\.(1[1-9])$/.test(one('Requires-Python') ?? ''))
    problem(`${what}: Requires-Python ${one('Requires-Python')}, not a maintained floor`);
  const classifiers = fields.Classifier ?? [];
  for (const c of ['Typing :: Typed', 'Programming Language :: Python :: 3 :: Only', 'Operating System :: POSIX :: Linux']) {
    if (!classifiers.includes(c)) problem(`${what}: no classifier '${c}'`);
  }
  const urls = (fields['Project-URL'] ?? []).map((u) => u.split(',')[0]);
  for (const u of ['Homepage', 'Documentation', 'Source', 'Issues']) if (!urls.includes(u)) problem(`${what}: no Project-URL ${u}`);
}

/** A Python whose setuptools and wheel make wheels (Debian's /usr/bin/python3 has them). */
function pythonBuilder() {
  for (const python of ['python3', '/usr/bin/python3']) {
    if (spawnSync(python, ['-c', 'import setuptools, wheel'], { encoding: 'utf8' }).status === 0) return python;
  }
  return undefined;
}

if (!values['no-python']) {
  const python = pythonBuilder();
  if (!python) {
    problem('no Python with setuptools and wheel (apt-get install python3-setuptools python3-wheel): the wheel and sdist were not checked');
  } else {
    const bindings = join(repo, 'bindings', 'python');
    const dist = join(out, 'python');
    step('python3 setup.py sdist');
    run(python, ['setup.py', '-q', 'egg_info', '--egg-base', out, 'sdist', '-d', dist], {
      cwd: bindings,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const sdist = readdirSync(dist).find((f) => f.endsWith('.tar.gz'));
    const sdistName = `gpumem_torch-${version}.tar.gz`;
    if (sdist !== sdistName) problem(`sdist: ${sdist}, expected ${sdistName} (PEP 625)`);
    else {
      const root = `gpumem_torch-${version}`;
      const members = run('tar', ['tzf', join(dist, sdist)]).split('\n');
      for (const m of [
        'native/CMakeLists.txt',
        'native/src/torch/CMakeLists.txt',
        'native/cmake/portable.cmake',
        'setup.py',
        'pyproject.toml',
      ]) {
        if (!members.includes(`${root}/${m}`)) problem(`sdist: no ${m}`);
      }
      checkPythonMetadata('sdist PKG-INFO', metadataFields(run('tar', ['xzOf', join(dist, sdist), `${root}/PKG-INFO`])));
      artifacts.push({
        registry: 'PyPI',
        name: 'gpumem-torch',
        version,
        file: sdist,
        bytes: statSync(join(dist, sdist)).size,
        files: members.filter(Boolean).length,
      });

      // The wheel from the sdist alone, in an empty folder: what pip does for a user without a wheel that fits.
      const clean = join(out, 'from-sdist');
      mkdirSync(clean);
      step(`pip wheel from ${sdist} alone, in ${clean} (compiles libgpumem_torch.so: minutes)`);
      const wheelDir = join(clean, 'wheelhouse');
      const built = spawnSync(python, ['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-w', wheelDir, join(dist, sdist)], {
        cwd: clean,
        encoding: 'utf8',
        stdio: ['ignore', 'inherit', 'inherit'],
        env: { ...process.env, PIP_NO_INDEX: '1' },
      });
      if (built.status !== 0) problem(`the wheel from the sdist: pip wheel failed (exit ${built.status})`);
      else {
        const wheel = readdirSync(wheelDir).find((f) => f.endsWith('.whl'));
        if (
          !wheel ||
          !new RegExp(`^gpumem_torch-${version.replaceAll('.', '\\.')}-py3-none-(manylinux_2_28|linux)_x86_64\\.whl$`).test(wheel)
        ) {
          problem(`the wheel from the sdist: ${wheel}, not gpumem_torch-${version}-py3-none-<platform>.whl`);
        } else {
          const unzip = (code) =>
            run(python, ['-c', `import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\n${code}`, join(wheelDir, wheel)]);
          const metadata = unzip(`sys.stdout.write(z.read('gpumem_torch-${version}.dist-info/METADATA').decode())`);
          checkPythonMetadata(`${wheel} METADATA`, metadataFields(metadata));
          const listing = unzip("print('\\n'.join(z.namelist()))").split('\n').filter(Boolean);
          if (!listing.includes('gpumem_torch/lib/libgpumem_torch.so')) problem(`${wheel}: no gpumem_torch/lib/libgpumem_torch.so`);
          if (!listing.includes('gpumem_torch/py.typed')) problem(`${wheel}: no gpumem_torch/py.typed`);
          artifacts.push({
            registry: 'PyPI',
            name: 'gpumem-torch',
            version,
            file: wheel,
            bytes: statSync(join(wheelDir, wheel)).size,
            files: listing.length,
            note: "built from the sdist alone; the release's wheel is manylinux_2_28, built in the repository",
          });
        }
      }
    }
  }
}

// --- the report ---------------------------------------------------------------------------------
const mib = (b) => `${(b / 2 ** 20).toFixed(2)} MiB`;
const width = Math.max(...artifacts.map((a) => a.name.length), 7);
process.stdout.write(`release ${version}: what would be published\n\n`);
process.stdout.write(`registry  ${'package'.padEnd(width)}  version  ${'size'.padStart(10)}  file\n`);
for (const a of artifacts) {
  const note = a.note ? ` (${a.note})` : '';
  process.stdout.write(
    `${a.registry.padEnd(8)}  ${a.name.padEnd(width)}  ${a.version.padEnd(7)}  ${mib(a.bytes).padStart(10)}  ${a.file}${note}\n`,
  );
}
process.stdout.write(
  `\nTo publish: push the tag v${version} (.github/workflows/release.yml publishes every npm package with provenance and the wheel and sdist to PyPI);\n` +
    `by hand: npm publish --provenance in each package's folder (${packages.map((p) => p.dir).join(', ')}), then twine upload of the wheel and sdist.\n`,
);
if (values.json) {
  writeFileSync(values.json, `${JSON.stringify({ version, artifacts, problems, node: process.version }, null, 2)}\n`);
}
if (problems.length > 0) {
  process.stderr.write(`\nrelease-check: ${problems.length} problem(s):\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
  process.exit(1);
}
process.stdout.write('\nrelease-check: every artifact checked, nothing published\n');
