/**
 * What `gpumem info` prints: devices, driver and runtime versions, memory, the peer access matrix
 * between the devices, registered strategies, and whether cuBLAS and cuSPARSE can be loaded.
 * @module
 */
import { listAllocators, type StrategyInfo } from './registry.js';
import { formatBytes } from './format.js';
import { loadNative, type NativeDeviceProperties, type NativeNcclLibrary } from './native.js';
import { deviceStatus } from './device.js';
import { formatPeerMatrix, peerTopology, type PeerTopology } from './topology.js';

export interface SystemInfo {
  builtWithCuda: boolean;
  /** e.g. '13.0'; null where there is no driver. */
  driverVersion: string | null;
  runtimeVersion: string | null;
  deviceStatus: string;
  devices: Array<NativeDeviceProperties & { freeBytes: number; totalBytes: number }>;
  /** Peer access and links between every pair of devices (no pairs with fewer than two). */
  topology: PeerTopology;
  strategies: Array<StrategyInfo & { available: boolean }>;
  libraries: Array<{ name: string; loadable: boolean; error?: string }>;
  /** NCCL, for training over several GPUs (loaded at run time: libnccl.so.2 or GPUMEM_NCCL_LIB). */
  nccl: NativeNcclLibrary;
}

const libraries = ['libcublas.so.13', 'libcublasLt.so.13', 'libcusparse.so.12'];

function version(v: number): string | null {
  return v > 0 ? `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}` : null;
}

/** Gathers the system's information. */
export function systemInfo(): SystemInfo {
  const native = loadNative();
  const count = native.deviceCount();
  const devices = [];
  for (let i = 0; i < count; i++) devices.push({ ...native.deviceProperties(i), ...native.memoryInfo(i) });
  return {
    builtWithCuda: native.builtWithCuda,
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
  lines.push(`devices: ${info.deviceStatus}`);
  for (const d of info.devices) {
    lines.push(
      `  [${d.index}] ${d.name}  sm_${d.computeCapability.replace('.', '')}  ${d.multiprocessors} SMs  ` +
        `memory ${formatBytes(d.freeBytes)} free of ${formatBytes(d.totalBytes)}  managed: ${d.managedMemory ? 'yes' : 'no'}  ` +
        `memory pools: ${d.memoryPools ? 'yes' : 'no'}`,
    );
  }
  lines.push(...formatPeerMatrix(info.topology));
  lines.push('strategies:');
  const width = Math.max(...info.strategies.map((s) => s.name.length));
  for (const s of info.strategies) {
    lines.push(`  ${s.name.padEnd(width)}  ${s.available ? 'available  ' : 'needs a GPU'}  ${s.description}`);
  }
  lines.push('libraries:');
  for (const l of info.libraries) lines.push(`  ${l.name.padEnd(20)} ${l.loadable ? 'loadable' : `not loadable (${l.error})`}`);
  const { nccl } = info;
  const ncclVersion = nccl.version ? ` ${Math.floor(nccl.version / 10000)}.${Math.floor((nccl.version % 10000) / 100)}.${nccl.version % 100}` : '';
  lines.push(`  ${(nccl.path ?? 'libnccl.so.2').padEnd(20)} ${nccl.available ? `loadable (NCCL${ncclVersion}; --devices on GPUs uses it)` : `not loadable (${nccl.reason ?? 'unknown'}): --devices on GPUs needs it`}`);
  return lines.join('\n');
}
