#!/usr/bin/env node
// Before `npm pack` / `npm publish`: puts the built addon in prebuilds/<platform>-<arch>-<libc>/
// (linux-x64-glibc; prebuild-tag.mjs), where the loader finds it in an installed package, with what
// it was built for beside it (build.json). What prebuilds/ held before is removed: the package
// carries this build only.
// Release builds use the default architecture list (GPUMEM_CUDA_ARCH unset); a narrower one is
// packed too (for tests), with a warning.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prebuildTag } from './prebuild-tag.mjs';

const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
const built = join(packageDir, 'build', 'Release', 'gpumem.node');
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
const prebuilds = join(packageDir, 'prebuilds');
const target = join(prebuilds, prebuildTag());
rmSync(prebuilds, { recursive: true, force: true });
mkdirSync(target, { recursive: true });
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
