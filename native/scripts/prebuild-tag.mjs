// The folder of prebuilds/ that holds this machine's prebuilt addon: <platform>-<arch>, and on Linux
// the C library too (linux-x64-glibc, linux-x64-musl), so that a musl system never loads an addon
// linked against glibc. The loader (@gpumem/allocator-core, src/native.ts) names the folder the
// same way.

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
