/**
 * What `gpumem info` prints: devices, driver and runtime versions, memory, the peer access matrix
 * between the devices, registered strategies (and which can sleep and wake by tag), and whether cuBLAS and cuSPARSE can be loaded.
 * @module
 */
import { listAllocators, type StrategyInfo } from './registry.js';
import { formatBytes } from './format.js';
import { loadNative, type NativeDeviceProperties, type NativeKernelImage, type NativeNcclLibrary } from './native.js';
import { deviceStatus } from './device.js';
import { formatPeerMatrix, peerTopology, type PeerTopology } from './topology.js';

export interface SystemInfo {
  builtWithCuda: boolean;
  /**
   * The GPU architectures the kernels were built for, e.g. ['sm_80', ..., 'sm_120', 'compute_120']
   * (compute_: PTX, compiled by the driver for newer GPUs); empty without CUDA.
   */
  cudaArchitectures: string[];
  /** e.g. '13.0'; null where there is no driver. */
  driverVersion: string | null;
  runtimeVersion: string | null;
  deviceStatus: string;
  devices: Array<NativeDeviceProperties & { freeBytes: number; totalBytes: number; kernels: NativeKernelImage }>;
  /** Peer access and links between every pair of devices (no pairs with fewer than two). */
  topology: PeerTopology;
  strategies: Array<StrategyInfo & { available: boolean }>;
  libraries: Array<{ name: string; loadable: boolean; error?: string }>;
  /** NCCL, for training over several GPUs (loaded at run time: libnccl.so.2 or GPUMEM_NCCL_LIB). */
  nccl: NativeNcclLibrary;
}

const libraries = ['libcublas.so.13', 'libcublasLt.so.13', 'libcusparse.so.12'];

/** CMake's architecture list ("80-real 90 ...") as sm_/compute_ names: a bare number is both. */
export function architectureNames(cmakeList: string): string[] {
  const names: string[] = [];
  for (const entry of cmakeList.split(/[\s;,]+/).filter(Boolean)) {
    const [arch, kind] = entry.split('-');
    if (kind !== 'virtual') names.push(`sm_${arch}`);
    if (kind !== 'real') names.push(`compute_${arch}`);
  }
  return names;
}

function version(v: number): string | null {
  return v > 0 ? `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}` : null;
}

/** Gathers the system's information. */
export function systemInfo(): SystemInfo {
  const native = loadNative();
  const count = native.deviceCount();
  const devices = [];
  for (let i = 0; i < count; i++) {
    devices.push({ ...native.deviceProperties(i), ...native.memoryInfo(i), kernels: native.kernelImage(i) });
  }
  return {
    builtWithCuda: native.builtWithCuda,
    cudaArchitectures: architectureNames(native.cudaArchitectures),
    driverVersion: version(native.driverVersion),
    runtimeVersion: version(native.runtimeVersion),
    deviceStatus: count > 0 ? `${count} CUDA device(s)` : deviceStatus(),
    devices,
    topology: peerTopology(),
    strategies: listAllocators().map((s) => ({ ...s, available: !s.requiresCuda || count > 0 })),
    libraries: libraries.map((name) => {
      const r = native.canLoadLibrary(name);
      return r.ok ? { name, loadable: true } : { name, loadable: false, error: r.error ?? 'unknown' };
    }),
    nccl: native.ncclLibrary(),
  };
}

/** The human-readable form of {@link systemInfo}. */
export function formatSystemInfo(info: SystemInfo): string {
  const lines: string[] = [];
  lines.push(`gpumem native core: ${info.builtWithCuda ? 'built with CUDA' : 'built WITHOUT CUDA (host strategies only)'}`);
  lines.push(`CUDA driver: ${info.driverVersion ?? 'none'}   runtime: ${info.runtimeVersion ?? 'none'}`);
  if (info.builtWithCuda) lines.push(`kernels built for: ${info.cudaArchitectures.join(' ')}`);
  lines.push(`devices: ${info.deviceStatus}`);
  for (const d of info.devices) {
    lines.push(
      `  [${d.index}] ${d.name}  sm_${d.computeCapability.replace('.', '')}  ${d.multiprocessors} SMs  ` +
        `memory ${formatBytes(d.freeBytes)} free of ${formatBytes(d.totalBytes)}  managed: ${d.managedMemory ? 'yes' : 'no'}  ` +
        `memory pools: ${d.memoryPools ? 'yes' : 'no'}`,
    );
    const warning = kernelWarning(d);
    if (warning) lines.push(`      warning: ${warning}`);
  }
  lines.push(...formatPeerMatrix(info.topology));
  lines.push('strategies:');
  const width = Math.max(...info.strategies.map((s) => s.name.length));
  for (const s of info.strategies) {
    lines.push(`  ${s.name.padEnd(width)}  ${s.available ? 'available  ' : 'needs a GPU'}  ${s.description}`);
  }
  const sleeping = info.strategies.filter((s) => s.sleep).map((s) => s.name);
  lines.push(`  sleep and wake by tag: ${sleeping.length > 0 ? sleeping.join(', ') : 'none'}`);
  lines.push('libraries:');
  for (const l of info.libraries) lines.push(`  ${l.name.padEnd(20)} ${l.loadable ? 'loadable' : `not loadable (${l.error})`}`);
  const { nccl } = info;
  const ncclVersion = nccl.version
    ? ` ${Math.floor(nccl.version / 10000)}.${Math.floor((nccl.version % 10000) / 100)}.${nccl.version % 100}`
    : '';
  lines.push(
    `  ${(nccl.path ?? 'libnccl.so.2').padEnd(20)} ${nccl.available ? `loadable (NCCL${ncclVersion}; --devices on GPUs uses it)` : `not loadable (${nccl.reason ?? 'unknown'}): --devices on GPUs needs it`}`,
  );
  return lines.join('\n');
}

/**
 * Why a device cannot run this build's kernels (the allocators still work there, the trainer's ops
 * do not), or that it runs them only through PTX compiled at load time; undefined when it runs
 * machine code built for it.
 */
export function kernelWarning(d: { computeCapability: string; kernels: NativeKernelImage }): string | undefined {
  const sm = `sm_${d.computeCapability.replace('.', '')}`;
  if (!d.kernels.runnable) {
    return (
      `the trainer's kernels were not built for ${sm} (${d.kernels.error ?? 'no kernel image'}); ` +
      `rebuild with GPUMEM_CUDA_ARCH=native (or include ${sm.slice(3)} in GPUMEM_CUDA_ARCH); the allocators work regardless`
    );
  }
  if (d.kernels.ptxVersion > 0 && d.kernels.binaryVersion !== d.kernels.ptxVersion) {
    return `no machine code for ${sm}: the driver compiles the kernels from compute_${d.kernels.ptxVersion} PTX at first use (slower start)`;
  }
  return undefined;
}
