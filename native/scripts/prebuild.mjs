#!/usr/bin/env node
// Before `npm pack` / `npm publish` of a platform package (npm/<suffix>/, its prepack script): puts
// the built addon in the package of this machine's platform (npm/linux-x64-gnu/ on Linux x64 with
// glibc; prebuild-tag.mjs names it), where the loader finds it through @gpumem/native's optional
// dependency, with what it was built for beside it (build.json).
// Release builds use the default architecture list (GPUMEM_CUDA_ARCH unset); a narrower one is
// packed too (for tests), with a warning.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { platformPackage, prebuildTag } from './prebuild-tag.mjs';

const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
const built = join(packageDir, 'build', 'Release', 'gpumem.node');
const tag = prebuildTag();
const name = platformPackage(tag);
const target = join(packageDir, 'npm', name.replace('@gpumem/native-', ''));
// Only the platforms @gpumem/native lists as optional dependencies have a package to fill.
const listed = Object.keys(JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')).optionalDependencies ?? {});
if (!listed.includes(name) || !existsSync(join(target, 'package.json'))) {
  process.stderr.write(`@gpumem/native: no platform package for ${tag} (${name} is not among @gpumem/native's optional dependencies)\n`);
  process.exit(1);
}
// A release's architectures: CMakeLists.txt's default list, read from the one place that sets it.
const defaultList = readFileSync(join(packageDir, 'CMakeLists.txt'), 'utf8').match(/set\(GPUMEM_CUDA_ARCH "([^"$]+)" CACHE/);
if (!defaultList) throw new Error('@gpumem/native: no default GPUMEM_CUDA_ARCH list in CMakeLists.txt');
const release = defaultList[1].split(';');
if (!existsSync(built)) {
  process.stderr.write(`@gpumem/native: nothing to pack: ${built} is missing; build it first (npm run build -w native)\n`);
  process.exit(1);
}
const addon = createRequire(import.meta.url)(built);
const architectures = addon.cudaArchitectures.split(/\s+/).filter(Boolean);
for (const file of ['gpumem.node', 'build.json']) rmSync(join(target, file), { force: true });
copyFileSync(built, join(target, 'gpumem.node'));
writeFileSync(
  join(target, 'build.json'),
  `${JSON.stringify({ builtWithCuda: addon.builtWithCuda, cudaRuntime: addon.runtimeVersion, cudaArchitectures: architectures, napiVersion: 8 }, null, 2)}\n`,
);
if (!addon.builtWithCuda) {
  process.stderr.write('@gpumem/native: warning: packing an addon built WITHOUT CUDA (host strategies only)\n');
} else if (release.some((a) => !architectures.includes(a))) {
  process.stderr.write(
    `@gpumem/native: warning: packing kernels for ${architectures.join(' ')} only; a release carries ${release.join(' ')}\n`,
  );
}
// A release loads on every glibc 2.28 system (cmake/portable.cmake); a build linked for this machine only is packed with a warning.
const portable = spawnSync('bash', [join(packageDir, 'scripts', 'check-glibc.sh'), built], { encoding: 'utf8' });
if (portable.status !== 0) {
  process.stderr.write(
    `@gpumem/native: warning: packing an addon that needs more than glibc 2.28 (scripts/check-glibc.sh):\n${portable.stdout}${portable.stderr}`,
  );
}
