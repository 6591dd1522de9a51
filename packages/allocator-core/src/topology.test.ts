/**
 * The peer topology and how `gpumem info` prints it: the matrix from fake topologies (any number of
 * devices, NVLink, PCIe, no peer access, NVML missing), the info text around it, and the addon's
 * query on this machine (never a throw, whatever the devices).
 */
import { describe, expect, it } from 'vitest';
import {
  deviceCount,
  formatPeerMatrix,
  formatSystemInfo,
  peerCell,
  peerTopology,
  systemInfo,
  type PeerPair,
  type PeerTopology,
  type SystemInfo,
} from './index.js';

function pair(from: number, to: number, fields: Partial<PeerPair> = {}): PeerPair {
  return {
    from,
    to,
    canAccessPeer: true,
    performanceRank: 0,
    accessSupported: true,
    nativeAtomics: true,
    link: 'pcie',
    nvlinks: 0,
    ...fields,
  };
}

/** Every ordered pair of `n` devices, with `fields(from, to)` over the defaults. */
function topology(n: number, fields: (from: number, to: number) => Partial<PeerPair> = () => ({}), nvmlStatus = ''): PeerTopology {
  const pairs: PeerPair[] = [];
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) if (i !== j) pairs.push(pair(i, j, fields(i, j)));
  return { deviceCount: n, pciBusIds: Array.from({ length: n }, (_, i) => `0000:${(0x10 + i).toString(16)}:00.0`), pairs, nvmlStatus };
}

const empty: PeerTopology = { deviceCount: 0, pciBusIds: [], pairs: [], nvmlStatus: '' };

describe('formatPeerMatrix', () => {
  it('says in one line that there are no peers with fewer than two devices', () => {
    expect(formatPeerMatrix(empty)).toEqual(['peer access: no CUDA device, so no peers']);
    expect(formatPeerMatrix(topology(1))).toEqual(['peer access: one CUDA device (cuda:0), so no peers']);
  });

  it('prints X on the diagonal and NV<links> between NVLinked devices', () => {
    const lines = formatPeerMatrix(topology(2, () => ({ link: 'nvlink', nvlinks: 4, performanceRank: 0 })));
    expect(lines[0]).toMatch(/^peer access \(row: the accessing device, column: the device whose memory it accesses\):$/);
    expect(lines[1]).toBe('          cuda:0  cuda:1');
    expect(lines[2]).toBe('  cuda:0  X       NV4');
    expect(lines[3]).toBe('  cuda:1  NV4     X');
    expect(lines[4]).toMatch(/NV#: NVLink with # active links .*-: no peer access/);
    expect(lines).toHaveLength(5);
  });

  it("prints PCIe, '-' where there is no peer access, and P2P (with NVML's reason) where the link is unknown", () => {
    const mixed = topology(3, (from, to) => {
      if (from === 2 || to === 2) return { canAccessPeer: false, accessSupported: false };
      return { link: 'pcie' };
    });
    const rows = formatPeerMatrix(mixed);
    expect(rows[2]).toBe('  cuda:0  X       PCIe    -');
    expect(rows[3]).toBe('  cuda:1  PCIe    X       -');
    expect(rows[4]).toBe('  cuda:2  -       -       X');
    const unknown = topology(2, () => ({ link: 'unknown', linkReason: 'no NVML' }), 'NVML (libnvidia-ml.so.1) cannot be loaded: not found');
    expect(peerCell(unknown, 0, 1)).toBe('P2P');
    expect(formatPeerMatrix(unknown).at(-1)).toBe('  links unknown: NVML (libnvidia-ml.so.1) cannot be loaded: not found');
  });

  it('an asymmetric matrix reads by row: the device that accesses', () => {
    const t = topology(2, (from) => ({ canAccessPeer: from === 0 }));
    expect(peerCell(t, 0, 1)).toBe('PCIe');
    expect(peerCell(t, 1, 0)).toBe('-');
  });
});

describe('gpumem info: the topology after the devices', () => {
  const base: SystemInfo = {
    builtWithCuda: true,
    cudaArchitectures: ['sm_90'],
    driverVersion: '13.0',
    runtimeVersion: '13.0',
    deviceStatus: '2 CUDA device(s)',
    devices: [0, 1].map((index) => ({
      index,
      name: 'GPU',
      computeCapability: '9.0',
      totalMemory: 2 ** 36,
      multiprocessors: 132,
      managedMemory: true,
      concurrentManagedAccess: true,
      memoryPools: true,
      pciBusId: 0x10 + index,
      l2CacheBytes: 2 ** 25,
      freeBytes: 2 ** 35,
      totalBytes: 2 ** 36,
      kernels: { runnable: true, binaryVersion: 90, ptxVersion: 90 },
    })),
    topology: topology(2, () => ({ link: 'nvlink', nvlinks: 18 })),
    strategies: [],
    libraries: [],
    nccl: { available: true, path: 'libnccl.so.2', version: 22803 },
  };

  it('prints the matrix between the device lines and the strategies', () => {
    const text = formatSystemInfo({
      ...base,
      strategies: [
        {
          name: 'cuda',
          description: 'd',
          requiresCuda: true,
          nativeLayers: true,
          capturable: false,
          hostMemory: false,
          requiresOptions: false,
          managedMemory: false,
          spillsToHost: false,
          peerAccess: true,
          sleep: false,
          addressOnly: false,
          available: true,
        },
      ],
    });
    const lines = text.split('\n');
    const devices = lines.findIndex((l) => l.startsWith('devices: '));
    const matrix = lines.findIndex((l) => l.startsWith('peer access'));
    const strategies = lines.indexOf('strategies:');
    expect(devices).toBeGreaterThanOrEqual(0);
    expect(matrix).toBe(devices + 3); // the two device lines, then the matrix
    expect(strategies).toBeGreaterThan(matrix);
    expect(text).toContain('  cuda:0  X       NV18');
    expect(text).toMatch(/libnccl\.so\.2 +loadable \(NCCL 2\.28\.3; --devices on GPUs uses it\)$/m);
    const missing = formatSystemInfo({ ...base, nccl: { available: false, path: 'libnccl.so.2', reason: 'NCCL not found' } });
    expect(missing).toMatch(/libnccl\.so\.2 +not loadable \(NCCL not found\): --devices on GPUs needs it$/m);
  });

  it('says so in one line without devices', () => {
    const text = formatSystemInfo({ ...base, deviceStatus: 'no CUDA device', devices: [], topology: empty });
    expect(text).toMatch(/^devices: no CUDA device\npeer access: no CUDA device, so no peers\nstrategies:$/m);
  });

  it('systemInfo() carries the topology (what --json prints)', () => {
    const info = systemInfo();
    expect(info.topology.deviceCount).toBe(info.devices.length);
    expect(JSON.parse(JSON.stringify(info)).topology).toEqual(info.topology);
  });
});

describe('peerTopology() on this machine', () => {
  it('never throws, and lists every ordered pair of the visible devices', () => {
    const t = peerTopology();
    const n = deviceCount();
    expect(t.deviceCount).toBe(n);
    expect(t.pciBusIds).toHaveLength(n);
    expect(t.pairs).toHaveLength(n * (n - 1));
    for (const p of t.pairs) {
      expect(p.from).not.toBe(p.to);
      expect(['nvlink', 'pcie', 'unknown']).toContain(p.link);
      if (p.link === 'nvlink') expect(p.nvlinks).toBeGreaterThan(0);
      else expect(p.nvlinks).toBe(0);
      if (p.link === 'unknown') expect(p.linkReason).toBeTruthy();
    }
  });
});
