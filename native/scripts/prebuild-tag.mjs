// This machine's platform as the prebuilt addons are named: <platform>-<arch>, and on Linux the C
// library too (linux-x64-glibc, linux-x64-musl), so that a musl system never loads an addon linked
// against glibc; and the package that carries the prebuilt addon of a platform (npm/<suffix>/,
// @gpumem/native-<suffix>, glibc named 'gnu' as napi-rs names it). The loader
// (@gpumem/allocator-core, src/native.ts) names both the same way.

/** 'glibc' or 'musl' on Linux (Node's report names glibc's version when it runs on glibc); undefined elsewhere. */
export function hostLibc() {
  if (process.platform !== 'linux') return undefined;
  // Without the network section the report is quick and never waits on name resolution.
  const excludeNetwork = process.report.excludeNetwork;
  process.report.excludeNetwork = true;
  try {
    return process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
  } finally {
    process.report.excludeNetwork = excludeNetwork;
  }
}

/** e.g. 'linux-x64-glibc', 'darwin-arm64'. */
export function prebuildTag() {
  const libc = hostLibc();
  return `${process.platform}-${process.arch}${libc ? `-${libc}` : ''}`;
}

/** The package holding the prebuilt addon for `tag`: 'linux-x64-glibc' -> '@gpumem/native-linux-x64-gnu'. */
export function platformPackage(tag = prebuildTag()) {
  return `@gpumem/native-${tag.replace(/-glibc$/, '-gnu')}`;
}
