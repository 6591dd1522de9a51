/**
 * The one place that finds and loads the native addon (gpumem.node). It tries each candidate in
 * order, keeps every failure, and throws one error listing what it tried and how to fix it.
 * @module
 */
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidStateError } from './errors.js';
import { processShared, shareClass } from './process-shared.js';
import type { AllocatorStats, SleepReport, TagStats } from './types.js';

/** A native resource chain, as the addon exposes it. Internal: use the Allocator API. */
export interface NativeResource {
  /**
   * Binds `args` ([0] bytes, [1] stream, [2] pointer) to two argument-less functions: allocate()
   * reads bytes and stream and writes the pointer; deallocate() reads all three. One N-API call
   * each, with no per-argument conversion: the hot path of every native allocator.
   */
  fastPath(args: Float64Array): { allocate(): void; deallocate(): void };
  prefetch(ptr: number, bytes: number, toDevice: boolean, stream: number): boolean;
  recordStream(ptr: number, stream: number): void;
  stats(): NativeStats;
  resetPeak(): void;
  trim(bytesToKeep: number): void;
  write(ptr: number, offset: number, data: ArrayBufferView, stream: number): void;
  read(ptr: number, offset: number, target: ArrayBufferView, stream: number): void;
  dispose(): void;
  trackingEvents(clear: boolean): NativeTrackingEvents;
  setTrackingTag(tag: number): void;
  setTrackingEnabled(on: boolean): void;
  /** The tiered strategy's placement from now on; an InvalidStateError for every other strategy. */
  setPlacement(tier: 'auto' | 'device' | 'host'): void;
  /** A token other threads attach to with the spec `{ type: 'shared', token }` (same chain, joint ownership). */
  shareHandle(): number;
  /** Whether the chain's leaf can sleep (the strategies with the registry's `sleep` flag). */
  sleepable(): boolean;
  /** Sleep and wake by tag (gpumem/sleep.hpp); an InvalidStateError where the chain cannot sleep. */
  sleep(request: { tags?: readonly string[]; keep?: boolean | readonly string[] } | undefined): SleepReport;
  wake(tags: readonly string[] | undefined): SleepReport;
  tagStats(): TagStats[];
  trimBackup(): void;
  reserveBackup(bytes: number): void;
}

/** Statistics as the addon reports them: exactly the allocator's. */
export type NativeStats = AllocatorStats;

export interface NativeTrackingEvents {
  timeNs: Float64Array;
  pointer: Float64Array;
  bytes: Float64Array;
  stream: Float64Array;
  /** The strategy's reserved bytes right after each event. */
  reservedBytes: Float64Array;
  tag: Uint32Array;
  action: Uint8Array;
  dropped: number;
}

/** A native timing loop's result, in nanoseconds per malloc+free pair. */
export interface NativeTiming {
  /** The median over the batches. */
  medianNsPerPair: number;
  /** The fastest batch. */
  minNsPerPair: number;
  /** Each batch's figure, in the order the batches ran (one per repeat): the spread behind the median. */
  batchNsPerPair: number[];
}

/** One pass of a native trace replay. */
export interface NativeReplayPass {
  /** Nanoseconds spent in successful allocations, summed (the clock's own cost removed). */
  allocNs: number;
  /** Nanoseconds spent in frees, summed (the clock's own cost removed). */
  freeNs: number;
  /** Successful allocations. */
  allocs: number;
  /** Frees made. */
  frees: number;
  /** Allocations that ended in out-of-memory (not timed; their slots stay empty). */
  ooms: number;
  /** Frees skipped because their allocation had run out of memory. */
  skippedFrees: number;
  /** True when the pass ended at its first out-of-memory (`stopAtFirstOom`), before the trace's end. */
  stopped: boolean;
  /** The statistics at the end of the trace, before what it left live is freed; peaks cover the pass. */
  end: NativeStats;
}

/** A native trace replay: one record per pass. */
export interface NativeReplay {
  passes: NativeReplayPass[];
  /** The cost of one clock read, subtracted from every timed call. */
  clockOverheadNs: number;
}

/**
 * What the native chain builder (native/include/gpumem/chain_builder.hpp) builds: a strategy, its
 * options, and the layers any strategy may have. The builder alone decides the layer order (fault
 * right over the leaf, the limit over that, the strategy's own layer over the limited leaf,
 * tracking on top), the same for the Node addon and the PyTorch library. A strategy's own options
 * are those its TypeScript options definition checked (e.g. the pool's `upstream`,
 * `maxReservedBytes`, ...; a plug-in library's `library` and `options` string); the native side
 * checks them again by name, so a strategy's options are not listed here.
 */
export type ChainSpec = {
  /** The strategy's native name: 'host', 'cuda', 'pool', ..., or 'plugin' (a plug-in library). */
  strategy: string;
  /** The device's CUDA ordinal (default 0); ignored by 'host' and by a pool over host memory; 'plugin' and 'expandable': -1 is the host. */
  device?: number;
  /** Devices that may read and write the memory (memory on a CUDA device only; checked again natively). */
  peerAccess?: number[];
  /** Caps the bytes taken from the (possibly failing) leaf. */
  limitBytes?: number;
  /** Fails allocations asked of the leaf: every Nth, or any past a byte budget. */
  faultInjection?: { failEvery?: number; failAfterBytes?: number };
  /** Records every call in a ring of this many events. */
  trackingCapacity?: number;
  /** The leaf hands out addresses backed by nothing (strategies with the addressOnly flag only; checked natively). */
  addressOnly?: boolean;
  /** The strategy's own options, checked already. */
  options?: Record<string, string | number | boolean>;
};

/** What a native Resource is made from: a chain to build, or a chain another thread shared. */
export type ResourceSpec = ChainSpec | { type: 'shared'; token: number };

/** The native benchmark loops, trace replay and test kernels; each takes a Resource first. */
export interface NativeTools {
  benchPairs(resource: NativeResource, bytes: number, iterations: number, repeats: number, stream: number): NativeTiming;
  benchTrace(resource: NativeResource, sizes: Float64Array, window: number, repeats: number, stream: number): NativeTiming;
  replay(
    resource: NativeResource,
    action: Uint8Array,
    slot: Uint32Array,
    bytes: Float64Array,
    stream: Float64Array,
    slots: number,
    repeats: number,
    stopAtFirstOom: boolean,
  ): NativeReplay;
  fillU32(resource: NativeResource, ptr: number, count: number, value: number, stream: number): void;
  sumU32(resource: NativeResource, ptr: number, count: number, outPtr: number, stream: number, spinNs?: number): void;
  /** fillU32 from a kernel on `device` (a peer of the memory's device), waiting for it. */
  peerFillU32(resource: NativeResource, ptr: number, count: number, value: number, device: number): void;
  /** Queues on host stream `stream` a copy of `data` to `ptr` that runs when the stream is reached (tests of stream order). */
  deferHostWrite(stream: number, ptr: number, data: Uint8Array): void;
  /** Runs the work queued on host stream `stream`. */
  synchronizeHostStream(stream: number): void;
  /** Runs the work queued on every host stream. */
  synchronizeHostStreams(): void;
  /** sumU32 on raw device pointers: spins `spinNs` on `stream`, then adds the sum of `count` u32 at ptr into the u64 at outPtr. */
  delayedAddU32(ptr: number, count: number, outPtr: number, stream: number, spinNs: number): void;
}

/** What the runtime says of this build's kernels on one device. */
export interface NativeKernelImage {
  runnable: boolean;
  /** The architecture of the machine code the device runs (e.g. 90), or the PTX JIT target. */
  binaryVersion: number;
  /** The PTX architecture the image was compiled from; below binaryVersion when the driver compiled PTX at load. */
  ptxVersion: number;
  /** Why the device cannot run the kernels (e.g. cudaErrorNoKernelImageForDevice). */
  error?: string;
}

/**
 * The addon's members that the core calls itself. Those only another package calls (the
 * communicators of @gpumem/distributed, the trainer's ops of @gpumem/gnn, the host-link benchmark of
 * ./tools) are declared by that package and reached through {@link nativeAddonPart}.
 */
export interface NativeAddon {
  builtWithCuda: boolean;
  driverVersion: number;
  runtimeVersion: number;
  /** The CUDA architectures the kernels were built for, CMake's list ("80-real ... 120"); '' without CUDA. */
  cudaArchitectures: string;
  /** Whether `device` can run this build's kernels (machine code or PTX it can compile); never throws. */
  kernelImage(device: number): NativeKernelImage;
  deviceCount(): number;
  deviceStatus(): string;
  deviceProperties(device: number): NativeDeviceProperties;
  memoryInfo(device: number): { freeBytes: number; totalBytes: number };
  /** Every visible device pair's P2P facts and link; never throws (no devices: an empty list). */
  peerTopology(): NativePeerTopology;
  /** cudaDeviceCanAccessPeer(accessor, owner); false for anything that is not a pair of devices. */
  canAccessPeer(accessor: number, owner: number): boolean;
  createStream(device: number): number;
  destroyStream(stream: number): void;
  synchronizeStream(stream: number): void;
  synchronizeDevice(device: number): void;
  /** cudaSetDevice: kernels and cuBLAS run on the calling thread's current device. */
  setCurrentDevice(device: number): void;
  createEvent(device: number): number;
  destroyEvent(event: number): void;
  recordEvent(event: number, stream: number): void;
  synchronizeEvent(event: number): void;
  queryEvent(event: number): boolean;
  elapsedMs(start: number, end: number): number;
  canLoadLibrary(name: string): { ok: boolean; error?: string };
  beginCapture(stream: number): void;
  endCapture(stream: number): number;
  launchGraph(graph: number, stream: number): void;
  destroyGraph(graph: number): void;
  /**
   * Checks a chain spec as the native core does when it builds it (the option values, the limits,
   * the strategy's own checks), building nothing and touching no device: the one check of a native
   * strategy's options, a TypeError or RangeError naming the field.
   */
  checkSpec(spec: ChainSpec): void;
  Resource: {
    new (spec: ResourceSpec): NativeResource;
    /** The tag of the allocations this thread makes from now on; undefined: the process tag ('default'). */
    setThreadTag(tag: string | undefined): void;
  };
  tools: NativeTools;
  /** Whether NCCL loads (GPUMEM_NCCL_LIB, else libnccl.so.2), its version code, or why not; never throws (info() reports it). */
  ncclLibrary(): NativeNcclLibrary;
}

/** What ncclLibrary() reports. */
export interface NativeNcclLibrary {
  available: boolean;
  /** The file tried: GPUMEM_NCCL_LIB, or libnccl.so.2. */
  path?: string;
  /** ncclGetVersion's code, e.g. 22703 for 2.27.3. */
  version?: number;
  /** Why NCCL cannot be used. */
  reason?: string;
}

/** Device `from` accessing memory on device `to`, as the addon reports it. */
export interface NativePeerPair {
  from: number;
  to: number;
  canAccessPeer: boolean;
  performanceRank: number;
  accessSupported: boolean;
  nativeAtomics: boolean;
  link: 'nvlink' | 'pcie' | 'unknown';
  nvlinks: number;
  linkReason?: string;
}

/** The addon's peer topology (native/include/gpumem/topology.hpp). */
export interface NativePeerTopology {
  deviceCount: number;
  pciBusIds: string[];
  nvmlStatus: string;
  pairs: NativePeerPair[];
}

export interface NativeDeviceProperties {
  index: number;
  name: string;
  computeCapability: string;
  totalMemory: number;
  multiprocessors: number;
  managedMemory: boolean;
  concurrentManagedAccess: boolean;
  memoryPools: boolean;
  pciBusId: number;
  l2CacheBytes: number;
}

/**
 * Why the addon could not be loaded, as {@link NativeLoadError}'s `code`:
 * - `GPUMEM_NO_PREBUILT`: no prebuilt addon is published for this platform (e.g. darwin-arm64,
 *   linux-x64-musl) and none was built from source;
 * - `GPUMEM_PREBUILT_NOT_INSTALLED`: one is published, but its package (an optional dependency of
 *   @gpumem/native) is not installed (e.g. an install with `--omit=optional`);
 * - `GPUMEM_NATIVE_LOAD_FAILED`: an addon was there and failed to load, or none was found (e.g. a
 *   repository not built yet).
 */
export type NativeLoadErrorCode = 'GPUMEM_NO_PREBUILT' | 'GPUMEM_PREBUILT_NOT_INSTALLED' | 'GPUMEM_NATIVE_LOAD_FAILED';

/** Thrown when the addon cannot be loaded; lists every path tried and why each failed. */
export class NativeLoadError extends Error {
  override readonly name = 'NativeLoadError';
  constructor(
    message: string,
    readonly attempts: ReadonlyArray<{ path: string; error: string }>,
    readonly code: NativeLoadErrorCode = 'GPUMEM_NATIVE_LOAD_FAILED',
    /** This machine's platform as the prebuilt addons are named ('linux-x64-glibc', 'darwin-arm64', ...). */
    readonly platform: string = prebuildTag(),
  ) {
    super(message);
  }
}
shareClass(NativeLoadError, 'NativeLoadError', 1);

/**
 * The C library of this Linux ('glibc' or 'musl': Node's report names glibc's version only when it
 * runs on glibc); undefined on other platforms.
 */
function hostLibc(): 'glibc' | 'musl' | undefined {
  if (process.platform !== 'linux') return undefined;
  libc ??= readLibc();
  return libc;
}
let libc: 'glibc' | 'musl' | undefined;

/** What {@link hostLibc} reads, once: Node's report of this process. */
function readLibc(): 'glibc' | 'musl' {
  // Without the network section the report is quick and never waits on name resolution (Node's
  // types leave out excludeNetwork and the report's fields).
  const report = process.report as unknown as { excludeNetwork: boolean; getReport(): { header: { glibcVersionRuntime?: string } } };
  const excludeNetwork = report.excludeNetwork;
  report.excludeNetwork = true;
  try {
    return report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
  } finally {
    report.excludeNetwork = excludeNetwork;
  }
}

/**
 * The folder of @gpumem/native's prebuilds/ that would hold this machine's addon: platform, arch
 * and, on Linux, the C library ('linux-x64-glibc', 'linux-x64-musl', 'darwin-arm64'), so that musl
 * never loads an addon linked against glibc. native/scripts/prebuild-tag.mjs names it the same way
 * when it packs the addon.
 */
export function prebuildTag(
  host: { platform: string; arch: string; libc?: 'glibc' | 'musl' } = { platform: process.platform, arch: process.arch, libc: hostLibc() },
): string {
  return `${host.platform}-${host.arch}${host.libc ? `-${host.libc}` : ''}`;
}

/** The package that carries the prebuilt addon for `tag`: 'linux-x64-glibc' -> '@gpumem/native-linux-x64-gnu' (napi-rs's naming). */
export function platformPackage(tag: string = prebuildTag()): string {
  return `@gpumem/native-${tag.replace(/-glibc$/, '-gnu')}`;
}

/** The platform a package of {@link platformPackage}'s naming carries the addon for; undefined for any other name. */
function platformOf(name: string): string | undefined {
  const suffix = /^@gpumem\/native-(.+)$/.exec(name)?.[1];
  return suffix?.replace(/-gnu$/, '-glibc');
}

/**
 * What the loader knows of the prebuilt addons: this machine's platform, the platforms a prebuilt
 * addon is published for (the installed @gpumem/native's optional dependencies), and whether this
 * platform's package is installed.
 */
export interface Prebuilds {
  tag: string;
  available: readonly string[];
  installed: boolean;
}

/** The installed @gpumem/native's folder, or undefined when it is not installed as a dependency. */
function nativePackage(): string | undefined {
  try {
    return dirname(createRequire(import.meta.url).resolve('@gpumem/native/package.json'));
  } catch {
    return undefined; // not installed as a dependency; the repository layout still works
  }
}

/**
 * The folder of the package holding this platform's prebuilt addon, resolved as @gpumem/native
 * resolves its own optional dependency (pnpm puts it beside @gpumem/native only); undefined when
 * it is not installed.
 */
function platformPackageDir(nativeDir: string | undefined): string | undefined {
  const name = platformPackage();
  for (const from of [nativeDir ? join(nativeDir, 'package.json') : undefined, fileURLToPath(import.meta.url)]) {
    if (!from) continue;
    try {
      return dirname(createRequire(from).resolve(`${name}/package.json`));
    } catch {
      // not resolvable from here; try the next
    }
  }
  return undefined;
}

/** This machine's platform, those the installed @gpumem/native has a prebuilt package for, and whether this one's is installed. */
function installedPrebuilds(): Prebuilds {
  const dir = nativePackage();
  let optional: Record<string, string> = {};
  if (dir) {
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { optionalDependencies?: Record<string, string> };
    optional = manifest.optionalDependencies ?? {};
  }
  const available = Object.keys(optional)
    .map(platformOf)
    .filter((t): t is string => t !== undefined);
  const platformDir = platformPackageDir(dir);
  return {
    tag: prebuildTag(),
    available: available.sort(),
    installed: platformDir !== undefined && existsSync(join(platformDir, 'gpumem.node')),
  };
}

/** Where the addon may be, in the order tried. GPUMEM_ADDON overrides everything. */
export function addonCandidates(): string[] {
  const here = dirname(fileURLToPath(import.meta.url));
  const repoRoot = resolve(here, '..', '..', '..');
  const candidates: string[] = [];
  if (process.env.GPUMEM_ADDON) candidates.push(resolve(process.env.GPUMEM_ADDON));
  const nativePkg = nativePackage();
  if (nativePkg) {
    // A build from source first (it was made for this machine), then the platform package's prebuilt addon.
    candidates.push(join(nativePkg, 'build', 'Release', 'gpumem.node'));
  }
  const platformDir = platformPackageDir(nativePkg);
  if (platformDir) candidates.push(join(platformDir, 'gpumem.node'));
  if (nativePkg) candidates.push(join(nativePkg, 'build', 'Debug', 'gpumem.node'));
  candidates.push(join(repoRoot, 'native', 'build', 'Release', 'gpumem.node'), join(repoRoot, 'native', 'build', 'Debug', 'gpumem.node'));
  return [...new Set(candidates)];
}

/**
 * The addon, once loaded, for every copy of the core in the process: a plug-in's own copy would
 * otherwise load its own @gpumem/native beside the application's, a second native core whose
 * resources, streams and host queues the first does not know.
 */
const loaded = processShared('native-addon', 1, () => ({ addon: undefined as NativeAddon | undefined }));

/**
 * Loads the addon once per process (a copy of the core loaded later uses the one already loaded);
 * throws {@link NativeLoadError} listing every attempt when none loads.
 */
export function loadNative(): NativeAddon {
  loaded.addon ??= loadNativeFrom(addonCandidates());
  return loaded.addon;
}

/**
 * Loads the first candidate that loads; throws {@link NativeLoadError} listing every attempt and,
 * when @gpumem/native carries no prebuilt addon for this machine (`prebuilds`: by default the
 * installed package's), saying so first and how to build one.
 */
export function loadNativeFrom(candidates: readonly string[], prebuilds?: Prebuilds): NativeAddon {
  const req = createRequire(import.meta.url);
  const attempts: { path: string; error: string }[] = [];
  for (const path of candidates) {
    if (!existsSync(path)) {
      attempts.push({ path, error: 'not found' });
      continue;
    }
    try {
      return req(path) as NativeAddon;
    } catch (e) {
      attempts.push({ path, error: e instanceof Error ? e.message : String(e) });
    }
  }
  const lines = attempts.map((a) => `  - ${a.path}: ${a.error}`).join('\n');
  const known = prebuilds ?? installedPrebuilds();
  const { code, clause } = noPrebuild(known, attempts);
  throw new NativeLoadError(
    `Could not load the gpumem native addon (gpumem.node)${clause}. Tried:\n${lines}\n` +
      'Possible solutions:\n' +
      `  - build it from source: npx gpumem-build-native (it needs CMake >= 3.20, a C++17 compiler and the build tools, optional dependencies of @gpumem/native: npm install --save-dev cmake-js node-addon-api; the CUDA strategies also need nvcc, CUDA 12+; without it the host strategies are built);\n` +
      '  - in the repository: run `npm ci` (or `npm run build:native`) at its root;\n' +
      '  - point GPUMEM_ADDON at a gpumem.node you built elsewhere.',
    attempts,
    code,
    known.tag,
  );
}

/**
 * Why no prebuilt addon could serve this machine, as a clause of the loader's first sentence ('' when
 * its package is installed), and the error's code.
 */
function noPrebuild(
  { tag, available, installed }: Prebuilds,
  attempts: ReadonlyArray<{ error: string }>,
): { code: NativeLoadErrorCode; clause: string } {
  // Something was there and failed to load: the attempts say why.
  const failed = attempts.some((a) => a.error !== 'not found');
  if (installed || failed) return { code: 'GPUMEM_NATIVE_LOAD_FAILED', clause: '' };
  if (available.includes(tag)) {
    return {
      code: 'GPUMEM_PREBUILT_NOT_INSTALLED',
      clause:
        `: the prebuilt addon for ${tag}, ${platformPackage(tag)} (an optional dependency of @gpumem/native), is not installed ` +
        `(installed with --omit=optional? install it: npm install ${platformPackage(tag)})`,
    };
  }
  const carried = available.length > 0 ? `one is published for ${available.join(', ')} only` : '@gpumem/native lists none';
  const glibcTwin = tag.endsWith('-musl') && available.includes(tag.replace(/-musl$/, '-glibc'));
  const why = glibcTwin ? ', linked against glibc, which musl cannot load' : '';
  return { code: 'GPUMEM_NO_PREBUILT', clause: `: there is no prebuilt addon for ${tag} (${carried}${why})` };
}

/**
 * The addon typed as the caller declares it (`Part`): for members the core does not call, declared
 * by the package that calls them (its communicators, its kernels). Each member in `members` is checked to be there, so that an addon
 * built from an older tree is a clear {@link InvalidStateError} naming the member and `user`
 * rather than "is not a function" at the first call; members left out of `members` are optional
 * (the package feature-detects them).
 */
export function nativeAddonPart<Part extends object>(user: string, members: readonly (keyof Part & string)[]): Part {
  const addon = loadNative() as unknown as Record<string, unknown>;
  const missing = members.filter((m) => addon[m] === undefined);
  if (missing.length > 0) {
    throw new InvalidStateError(
      `The gpumem addon has no ${missing.map((m) => `'${m}'`).join(', ')}, which ${user} calls: it was built from an older tree; rebuild it (npm run build:native, or npx gpumem-build-native) or point GPUMEM_ADDON at a current gpumem.node`,
    );
  }
  return addon as unknown as Part;
}
