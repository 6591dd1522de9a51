/**
 * The peer topology of the visible CUDA devices: for every ordered pair, whether one can read and
 * write the other's memory directly (cudaDeviceCanAccessPeer), the runtime's P2P attributes, and
 * the link between them (NVLink with its number of active links, found through NVML; PCIe; or
 * unknown where NVML cannot be asked), and the matrix `gpumem info` prints from it.
 * @module
 */
import { nativeCall } from './errors.js';
import { loadNative } from './native.js';

/** How two devices are connected: NVLink, PCIe, or unknown (NVML absent or silent: see `linkReason`). */
export type PeerLink = 'nvlink' | 'pcie' | 'unknown';

/** Device `from` accessing memory on device `to`. */
export interface PeerPair {
  readonly from: number;
  readonly to: number;
  /** cudaDeviceCanAccessPeer(from, to): `from`'s kernels can read and write `to`'s memory once access is granted. */
  readonly canAccessPeer: boolean;
  /** cudaDevP2PAttrPerformanceRank: the link's relative performance (lower is faster); 0 where unknown. */
  readonly performanceRank: number;
  /** cudaDevP2PAttrAccessSupported. */
  readonly accessSupported: boolean;
  /** cudaDevP2PAttrNativeAtomicSupported: atomics on `to`'s memory from `from` run natively over the link. */
  readonly nativeAtomics: boolean;
  readonly link: PeerLink;
  /** Active NVLinks between the two (through an NVSwitch: the fewer of the two devices' switch links); 0 unless `link` is 'nvlink'. */
  readonly nvlinks: number;
  /** Why `link` is 'unknown'. */
  readonly linkReason?: string;
}

/** The peer topology of every visible CUDA device. */
export interface PeerTopology {
  readonly deviceCount: number;
  /** Per device, cudaDeviceGetPCIBusId (e.g. '0000:3B:00.0'). */
  readonly pciBusIds: readonly string[];
  /** Every (from, to) with from !== to, `from`-major: deviceCount × (deviceCount − 1) entries. */
  readonly pairs: readonly PeerPair[];
  /** Empty when NVML answered; else why no link is known (e.g. libnvidia-ml.so.1 cannot be loaded). */
  readonly nvmlStatus: string;
}

/**
 * The peer topology of the visible CUDA devices. Never throws for a machine without GPUs (or a
 * build without CUDA): deviceCount 0 and no pairs.
 */
export function peerTopology(): PeerTopology {
  return nativeCall('peerTopology', () => loadNative().peerTopology());
}

/** The pair (from, to) of `topology`; undefined when there is none. */
export function peerPair(topology: PeerTopology, from: number, to: number): PeerPair | undefined {
  return topology.pairs.find((p) => p.from === from && p.to === to);
}

/**
 * One cell of the matrix: 'X' on the diagonal, '-' where `from` has no peer access to `to`, else
 * the link: 'NV4' (4 NVLinks), 'PCIe', or 'P2P' (peer access over a link NVML could not name).
 */
export function peerCell(topology: PeerTopology, from: number, to: number): string {
  if (from === to) return 'X';
  const pair = peerPair(topology, from, to);
  if (!pair?.canAccessPeer) return '-';
  if (pair.link === 'nvlink') return `NV${pair.nvlinks}`;
  return pair.link === 'pcie' ? 'PCIe' : 'P2P';
}

/**
 * The peer access matrix as lines (rows: the device that accesses, columns: the device whose memory
 * it accesses), then a legend; one line instead where there are fewer than two devices.
 */
export function formatPeerMatrix(topology: PeerTopology): string[] {
  const n = topology.deviceCount;
  if (n === 0) return ['peer access: no CUDA device, so no peers'];
  if (n === 1) return ['peer access: one CUDA device (cuda:0), so no peers'];
  const ids = Array.from({ length: n }, (_, i) => `cuda:${i}`);
  const cells = ids.map((_, from) => ids.map((__, to) => peerCell(topology, from, to)));
  const width = Math.max(...ids.map((id) => id.length), ...cells.flat().map((c) => c.length));
  const row = (head: string, values: string[]) => `  ${head.padEnd(width)}  ${values.map((v) => v.padEnd(width)).join('  ')}`.trimEnd();
  const lines = ['peer access (row: the accessing device, column: the device whose memory it accesses):'];
  lines.push(row('', ids));
  cells.forEach((values, from) => {
    lines.push(row(ids[from]!, values));
  });
  lines.push('  NV#: NVLink with # active links   PCIe: over PCIe   P2P: peer access over an unknown link   -: no peer access');
  if (topology.nvmlStatus) lines.push(`  links unknown: ${topology.nvmlStatus}`);
  return lines;
}
