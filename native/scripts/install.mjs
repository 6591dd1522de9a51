#!/usr/bin/env node
// Builds the addon of @gpumem/native from source: where no prebuilt addon serves (the one prebuilt
// package, @gpumem/native-linux-x64-gnu, serves linux-x64 on glibc: another platform, or musl), or
// for this machine's GPUs. It says exactly what is missing. The build tools (cmake-js,
// node-addon-api) are optional peer dependencies: a user of the prebuilt addon never installs them,
// and no install script runs this: npm, pnpm and yarn pick the platform package by its os, cpu and
// libc fields instead.
//
//   npx gpumem-build-native            build from source now (GPUMEM_CUDA_ARCH=native: for this machine's GPUs)
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prebuildTag } from './prebuild-tag.mjs';

const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
const built = join(packageDir, 'build', 'Release', 'gpumem.node');
const say = (line) => process.stderr.write(`@gpumem/native: ${line}\n`);
const stop = () => process.exit(1);

say(`building the addon for ${prebuildTag()} from source`);

/** The first line a tool prints of its version, or undefined when it cannot be run. */
function versionOf(command, args = ['--version']) {
  const r = spawnSync(command, args, { encoding: 'utf8' });
  return r.status === 0 ? (r.stdout || r.stderr).split('\n')[0].trim() : undefined;
}

const missing = [];
const cmake = versionOf('cmake');
const cmakeVersion = cmake?.match(/(\d+)\.(\d+)/);
if (!cmakeVersion) missing.push('CMake >= 3.20 (e.g. apt-get install cmake, or pip install cmake)');
else if (Number(cmakeVersion[1]) < 3 || (Number(cmakeVersion[1]) === 3 && Number(cmakeVersion[2]) < 20)) {
  missing.push(`CMake >= 3.20 (found ${cmake})`);
}
const compiler = process.env.CXX ?? 'c++';
if (!versionOf(compiler)) missing.push(`a C++17 compiler (${compiler} was not found; e.g. apt-get install g++, or set CXX)`);
const resolveTool = (name) => {
  try {
    return createRequire(import.meta.url).resolve(name);
  } catch {
    return undefined;
  }
};
const cmakeJs = resolveTool('cmake-js/bin/cmake-js');
const buildTools = [cmakeJs ? '' : 'cmake-js', resolveTool('node-addon-api') ? '' : 'node-addon-api'].filter(Boolean);
if (buildTools.length > 0) {
  missing.push(`the build tools ${buildTools.join(' and ')} (optional peer dependencies: npm install --save-dev cmake-js node-addon-api)`);
}
if (missing.length > 0) {
  say(`cannot build the addon from source; missing:\n  - ${missing.join('\n  - ')}`);
  say('without it, nothing of gpumem can run here; install the above and run `npx gpumem-build-native`.');
  stop();
}

const nvcc = process.env.CUDACXX ?? (existsSync('/usr/local/cuda/bin/nvcc') ? '/usr/local/cuda/bin/nvcc' : 'nvcc');
if (versionOf(nvcc)) {
  say(
    `building with CUDA (${nvcc}) for ${process.env.GPUMEM_CUDA_ARCH || 'sm_80 to sm_120 and PTX'}: several minutes; GPUMEM_CUDA_ARCH=native builds for this machine's GPUs only`,
  );
} else {
  say(
    'no CUDA toolkit (nvcc) found: building the host strategies only; the GPU strategies and kernels need CUDA 12 or later (set CUDACXX to its nvcc)',
  );
}

const build = spawnSync(process.execPath, [cmakeJs, 'compile', '--out', 'build'], { cwd: packageDir, stdio: 'inherit' });
if (build.status !== 0) {
  say(`the build failed (exit ${build.status ?? build.signal}); the messages above say why`);
  stop();
}
say(`built ${built}`);
