/**
 * Runs over several devices: each rank's memory samples and epochs as a {@link DeviceRun} on the
 * run's one clock (milliseconds since the ranks were started), the run's epochs over all of its
 * devices, repeats pooled per rank, and the names and the line that show the devices' peaks.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import type { RankRecord } from '@gpumem/gnn';
import { capTimeline, cleanTimeline } from './timeline.js';
import type { CompareRun, DeviceRun } from './types.js';

/**
 * How far a rank's own clock (its `performance.now()`, which its epochs' `startMs` are on) lags the
 * samples' clock: the shift that puts its last sample at the end of its last epoch or before it (a
 * gcn rank samples as an epoch ends, so there it is exact), and at least 0 (a rank's process
 * starts after the launcher's zero).
 */
export function rankClockOffset(rank: Pick<RankRecord, 'epochs' | 'samples'>): number {
  const last = rank.epochs.at(-1);
  const sample = rank.samples.tMs.at(-1);
  if (!last || sample === undefined || !Number.isFinite(sample)) return 0;
  return Math.max(0, sample - (last.startMs + last.epochMs));
}

/** A rank's record as a device of the run: its peaks, its samples as a timeline of at most `maxPoints` points, its epochs on the samples' clock. */
export function deviceRun(rank: RankRecord, maxPoints: number): DeviceRun {
  const offset = rankClockOffset(rank);
  const { tMs, allocatedBytes, reservedBytes } = rank.samples;
  const peak = (key: 'peakAllocatedBytes' | 'peakReservedBytes') => rank.epochs.reduce((m, e) => Math.max(m, e[key]), 0);
  return {
    rank: rank.rank,
    device: rank.device,
    peakAllocatedBytes: peak('peakAllocatedBytes'),
    peakReservedBytes: peak('peakReservedBytes'),
    timeline: capTimeline(cleanTimeline({ tMs, allocatedBytes, reservedBytes }), maxPoints),
    phases: rank.epochs.map((e) => ({ name: `epoch ${e.epoch + 1}`, startMs: e.startMs + offset, endMs: e.startMs + offset + e.epochMs })),
    ...(rank.remoteRows ? { remoteRows: { ...rank.remoteRows } } : {}),
  };
}

/** The run's epochs over its devices: each from the first rank's start of it to the last rank's end. */
export function runPhases(devices: readonly DeviceRun[]): CompareRun['phases'] {
  const first = devices[0];
  if (!first) return [];
  return first.phases.map((phase, i) => {
    const spans = devices.map((d) => d.phases[i]).filter((p) => p !== undefined);
    return { name: phase.name, startMs: Math.min(...spans.map((p) => p.startMs)), endMs: Math.max(...spans.map((p) => p.endMs)) };
  });
}

/**
 * The devices of one row pooled over its repeats (runs of the same ranks on the same devices): each
 * rank's peaks the highest of any repeat, its timeline and epochs the first repeat's. Undefined
 * when a repeat has no devices.
 */
export function mergeDeviceRepeats(runs: readonly CompareRun[]): DeviceRun[] | undefined {
  const first = runs[0]?.devices;
  if (!first || runs.some((r) => !r.devices)) return undefined;
  return first.map((d, k) => {
    const same = runs.map((r) => r.devices![k]).filter((x): x is DeviceRun => x !== undefined);
    return {
      ...d,
      peakAllocatedBytes: Math.max(...same.map((x) => x.peakAllocatedBytes)),
      peakReservedBytes: Math.max(...same.map((x) => x.peakReservedBytes)),
    };
  });
}

/**
 * The names of a run's devices, in rank order: each device's own ("cuda:1") where the ranks are on
 * different devices, else with the rank ("rank 1 (host)", "rank 1 (cuda:0)").
 */
export function deviceLabels(devices: readonly Pick<DeviceRun, 'rank' | 'device'>[]): string[] {
  const distinct = new Set(devices.map((d) => d.device)).size === devices.length;
  return devices.map((d) => (distinct ? d.device : `rank ${d.rank} (${d.device})`));
}

/** Each device's peak allocated / reserved bytes: `cuda:0 1.20 GiB / 1.50 GiB · cuda:1 1.18 GiB / 1.50 GiB`. */
export function devicePeaksText(devices: readonly DeviceRun[]): string {
  const labels = deviceLabels(devices);
  return devices.map((d, k) => `${labels[k]} ${formatBytes(d.peakAllocatedBytes)} / ${formatBytes(d.peakReservedBytes)}`).join(' \u00b7 ');
}

/** True when some run of the comparison ran over several devices. */
export function anyDevices(runs: readonly Pick<CompareRun, 'devices'>[]): boolean {
  return runs.some((r) => r.devices !== undefined && r.devices.length > 0);
}
