/**
 * "Is this OOM real?": a trace and a device capacity in, a verdict out. The live bytes at the peak
 * are a floor no allocator goes under; each strategy's minimum capacity (replayed, at the capacity
 * and by bisection) is what that allocator needs; PyTorch's default caching allocator is modelled by
 * its twin, the `caching` strategy (its rules, with the settings the snapshot recorded).
 * Where those fall against the capacity gives exactly one verdict: it fits, it is fragmentation, or
 * it is real (and then what would bring the live bytes down, with figures from the trace).
 * @module
 */
import { formatBytes, hasAllocator, hasCudaDevice, strategyInfo } from '@gpumem/allocator-core';
import { strategyMemory, type StrategyMemory } from './advice.js';
import { createReplayAllocator } from './capacity.js';
import {
  bandCall,
  bandMargin,
  checkOutsideMemory,
  checkRelativeError,
  defaultOutsideMemory,
  defaultPytorchModelError,
  defaultPytorchModelErrorFloorBytes,
  defaultStrategyModelError,
  needBand,
  type BandCall,
  type NeedBand,
  type OutsideMemory,
} from './doctor-band.js';
import type { AllocationTrace, TraceEvent } from './format.js';
import { defaultCapacityResolution, findMinCapacity, type MinCapacity } from './min-capacity.js';
import {
  idleTagsAbove,
  offDevicePlan,
  peakBySizeClass,
  peakByStream,
  transientAtPeak,
  type PeakShare,
  type TransientAtPeak,
} from './peak-anatomy.js';
import { pytorchTwin } from './pytorch-twin.js';
import { compileTrace, peakByTag, replayTrace, type CompiledTrace, type ReplayLoop } from './replay.js';
import { otherFrameTag, type SnapshotHeader } from './snapshot/snapshot.js';
import type { LabelledStrategySpec } from './strategy-replay.js';

/**
 * The answers: three, and 'too-close' where the capacity lies inside the band of the need that
 * decides (see {@link NeedBand}): the figures cannot say which side it falls on.
 */
export type DoctorVerdictKind = 'fits' | 'fragmentation' | 'real' | 'too-close';

/** How to diagnose. */
export interface DoctorOptions {
  /** The device's capacity: the memory the program's allocator can have. */
  capacityBytes: number;
  /** The strategies to replay; those that keep their memory on the device are ranked. */
  strategies: readonly LabelledStrategySpec[];
  /**
   * The strategy that stands for PyTorch's default caching allocator (default: its twin `caching`,
   * with the settings a snapshot recorded in `allocator_settings`).
   */
  pytorchModel?: LabelledStrategySpec;
  /** Precision of the minimum-capacity searches (default: the capacity / 1024, 4 KiB to 2 MiB). */
  resolutionBytes?: number;
  /**
   * The most a replay can really take here (on a GPU, its free memory): the searches stop there.
   * They otherwise go up to the capacity or twice the live peak, the larger.
   */
  searchLimitBytes?: number;
  /**
   * Requests that failed in the recording (its `oom` events): 'replay' (the default) replays each as
   * an allocation freed at once, the least the program asked for there; 'skip' leaves them out
   * (a failure the program caught and worked around, such as a cuDNN workspace probe).
   */
  failedRequests?: 'replay' | 'skip';
  /** The replay loop (default: native for native strategies). */
  loop?: ReplayLoop;
  /**
   * Replay each strategy that has a host twin (the registry's `hostTwinOptions`: the same logic over
   * host memory) on it, on a GPU as without one, and over address-only memory where it can (the
   * registry's `addressOnly` flag: addresses backed by nothing) (default false: on a GPU, in device
   * memory). The verdict then does not depend on the machine: the replays take no device memory and
   * no host memory, whatever the host's memory or address-space limit (ulimit -v) and however large
   * the trace's requests.
   */
  hostTwins?: boolean;
  /**
   * Device memory the program holds outside its allocator, as a range (default
   * {@link defaultOutsideMemory}: measured on H200s, PyTorch 2.11: 0–250 MiB). Every need's band
   * adds it. Give `{ lowBytes: 0, highBytes: 0, ... }` where the capacity is already what the
   * allocator could have (a snapshot's out-of-memory entry: PyTorch's reserved plus the driver's free).
   */
  outside?: OutsideMemory;
  /** The relative error of the PyTorch model's need (default {@link defaultPytorchModelError}, ±0.4%). */
  pytorchModelError?: number;
  /** The least error of the PyTorch model's need, in bytes (default {@link defaultPytorchModelErrorFloorBytes}, 4 MiB). */
  pytorchModelErrorFloorBytes?: number;
  /** The relative error of gpumem's strategies' needs (default {@link defaultStrategyModelError}: 0, their replay runs their own code). */
  strategyModelError?: number;
}

/** One strategy, as the doctor saw it. */
export interface DoctorStrategy {
  label: string;
  memory: StrategyMemory;
  /** Whether it competes for the verdict: only strategies that keep their memory on the device do. */
  ranked: boolean;
  /**
   * True when its replays ran over address-only memory (with `hostTwins`, for a strategy with the
   * registry's `addressOnly` flag): they took no memory, so nothing about this machine shaped them.
   */
  addressOnly?: boolean;
  /** Why it is not ranked. */
  notRankedReason?: string;
  /**
   * Whether a replay at the capacity ran with no out-of-memory (ranked strategies and the PyTorch
   * model). The replay stops at its first failure, so it does not count them.
   */
  fits?: boolean;
  /**
   * The capacity it needs: its minimum capacity, plus the bytes held from before the trace began;
   * never above the capacity when it fitted there. Undefined when it did not fit under the search's cap.
   */
  needBytes?: number;
  /** The device memory the program needs under it: its need, the model's error, the memory outside the allocator. */
  band?: NeedBand;
  /** Where the capacity falls against the band; 'does-not-fit' too when it did not fit under the search's cap. */
  call?: BandCall;
  minCapacity?: MinCapacity;
  /** What stopped it (`RangeError: ...`). */
  error?: string;
}

/** The need that decided the verdict, its band, and the capacity against it. */
export interface DoctorDecision {
  /** 'live': the live bytes (real, or too close to them); 'pytorch': PyTorch's default as modelled; 'best': the best ranked strategy (when the model failed). */
  by: 'live' | 'pytorch' | 'best';
  /** What it is, in words ("the live bytes", "PyTorch's default (modelled by pool)", a strategy's label). */
  label: string;
  band: NeedBand;
  call: BandCall;
  /** The capacity less the band's middle (negative: over). */
  marginBytes: number;
}

/** One way to bring the live bytes down, with the figure the trace gives. */
export interface DoctorReduction {
  kind: 'tiered-by-tag' | 'tiered-by-stream' | 'sleep-idle-tags' | 'checkpointing';
  /** The tags or streams it moves or puts to sleep. */
  groups?: string[];
  /** Bytes it takes off the live peak (at most this much, when `exact` is false). */
  savedBytes: number;
  /** The live peak after it (at least this much, when `exact` is false). */
  liveAfterBytes: number;
  /**
   * Whether that is at most the capacity, from exact figures only: an estimate (`exact` false) is a
   * bound on the saving, never a promise, so it never reaches (its text gives its best case).
   */
  reaches: boolean;
  /** True when the figures follow from the trace exactly; false for an estimate (a bound). */
  exact: boolean;
  text: string;
}

/** What holds the memory at the peak of live bytes (the trace's own bytes, not those held from before it). */
export interface DoctorPeak {
  byTag: PeakShare[];
  byStream: PeakShare[];
  bySizeClass: PeakShare[];
  transient?: TransientAtPeak;
}

/** The verdict and everything behind it. */
export interface DoctorVerdict {
  kind: DoctorVerdictKind;
  capacityBytes: number;
  /** The need that decided, with its band: for 'too-close', the band the capacity lies in. */
  decision: DoctorDecision;
  /** The memory outside the allocator every band counts, and the models' relative errors. */
  uncertainty: { outside: OutsideMemory; pytorchModelError: number; pytorchModelErrorFloorBytes: number; strategyModelError: number };
  /** The peak of live bytes (frees counted at completion where the format knows): no allocator needs less. */
  liveBytes: number;
  /** Bytes allocated before the trace began (a snapshot whose history starts mid-run), held for all of it in every replay. */
  heldBeforeTraceBytes: number;
  largestRequestBytes: number;
  /** Requests that failed in the recording, and what was done with them. */
  failedRequests: { count: number; handling: 'replay' | 'skip' };
  /** The strategies, ranked ones first by the capacity they need. */
  strategies: DoctorStrategy[];
  /** PyTorch's default caching allocator, as modelled: the model's label, and its row's findings. */
  pytorch: DoctorStrategy & { recordedPeakReservedBytes?: number };
  /**
   * The ranked strategy needing the least (margin: capacity minus its need, negative when over;
   * fits: the capacity covers its band's top; call: where the capacity falls against its band).
   */
  best?: { label: string; needBytes: number; marginBytes: number; fits: boolean; band: NeedBand; call: BandCall };
  /** real: how far the live bytes, with the least memory outside the allocator, exceed the capacity. */
  excessBytes?: number;
  peak: DoctorPeak;
  /** What would reduce the live bytes: given when they, or every strategy, exceed the capacity. */
  reductions: DoctorReduction[];
  /** The verdict in words: the headline first. */
  lines: string[];
  /** How the figures were made, and what they do not cover. */
  notes: string[];
}

/** The default precision of the searches: a thousandth of the capacity, from 4 KiB to 2 MiB, a power of two. */
function defaultResolution(capacityBytes: number): number {
  const target = Math.max(4096, Math.min(defaultCapacityResolution, capacityBytes / 1024));
  return 2 ** Math.floor(Math.log2(target));
}

/** The trace with each failed request made an allocation freed at once (pointers below zero, which no trace uses). */
function withFailedRequests(events: readonly TraceEvent[]): TraceEvent[] {
  let next = -1;
  return events.flatMap((e) => {
    if (e.action !== 'oom') return [e];
    const ptr = next--;
    return [
      { ...e, action: 'alloc', ptr },
      { ...e, action: 'free', ptr },
    ];
  });
}

/** The snapshot details of a trace read from a PyTorch snapshot, if it was. */
function snapshotOf(trace: AllocationTrace): SnapshotHeader['snapshot'] | undefined {
  const h = trace.header as Partial<SnapshotHeader>;
  return h.source === 'torch-snapshot' && h.snapshot !== undefined ? h.snapshot : undefined;
}

/** PyTorch's peak reserved as recorded, for a trace read from a snapshot. */
function recordedPeakReserved(trace: AllocationTrace): number | undefined {
  const p = (trace as AllocationTrace & { pytorch?: { peakReservedBytes?: unknown } }).pytorch;
  // a snapshot without segment entries recorded nothing reserved: no figure to give
  return typeof p?.peakReservedBytes === 'number' && p.peakReservedBytes > 0 ? p.peakReservedBytes : undefined;
}

/**
 * The peak of live bytes over `events`, starting from `heldBefore` bytes allocated before them: a
 * free of a pointer the events never allocated frees part of those (a snapshot) or, with nothing
 * held before, is skipped (a ring buffer that dropped the start).
 */
function livePeak(events: readonly TraceEvent[], heldBefore: number): number {
  const live = new Map<number, number>();
  let now = heldBefore;
  let peak = now;
  for (const e of events) {
    if (e.action === 'alloc') {
      live.set(e.ptr, (live.get(e.ptr) ?? 0) + 1);
      now += e.bytes;
      peak = Math.max(peak, now);
    } else if (e.action === 'free') {
      const n = live.get(e.ptr) ?? 0;
      if (n > 0) {
        if (n === 1) live.delete(e.ptr);
        else live.set(e.ptr, n - 1);
        now -= e.bytes;
      } else if (heldBefore > 0) now = Math.max(0, now - e.bytes);
    }
  }
  return peak;
}

/** Why a strategy is not ranked, by where its memory lives (as replay's advice says it). */
function notRankedReason(memory: StrategyMemory): string | undefined {
  if (memory === 'host') return 'keeps its memory in host memory, not on the GPU';
  if (memory === 'spills') return 'spills to host memory past the device: its minimum capacity counts on host memory';
  return undefined;
}

interface Probe {
  compiled: CompiledTrace;
  /** The capacity the trace itself has: the device's less what was held before it. */
  replayCapacity: number;
  heldBefore: number;
  resolutionBytes: number;
  searchCap: number;
  loop?: ReplayLoop;
  hostTwins: boolean;
}

/** `spec` on its host twin where it has one (its registered twin options under the spec's own). */
function onHostTwin(spec: LabelledStrategySpec): { spec: LabelledStrategySpec; twin: boolean } {
  const twin = hasAllocator(spec.name) ? strategyInfo(spec.name).hostTwinOptions : undefined;
  return twin === undefined ? { spec, twin: false } : { spec: { ...spec, options: { ...twin, ...spec.options } }, twin: true };
}

/** Replays `spec` at the capacity, and searches its minimum capacity. */
function examine(given: LabelledStrategySpec, p: Probe): DoctorStrategy {
  let memory: StrategyMemory = 'device';
  const { spec, twin } = p.hostTwins ? onHostTwin(given) : { spec: given, twin: false };
  try {
    memory = strategyMemory(spec.name);
    const made = createReplayAllocator(spec, {
      capacityBytes: Math.max(1, p.replayCapacity),
      ...(p.hostTwins && { addressOnly: true }),
    });
    const addressOnly = made.addressOnly === true;
    let ooms: number;
    try {
      // on a GPU, a device strategy made over host memory (pool:upstream=host) keeps host memory;
      // its host twin stands for the device strategy
      if (!twin && hasCudaDevice() && made.allocator.device.kind === 'host') memory = 'host';
      // fits or not: the first failure decides (a trace whose million requests all fail costs one)
      ooms =
        p.replayCapacity < p.compiled.largestRequestBytes
          ? 1
          : replayTrace(p.compiled, made.allocator, { repeats: 1, stopAtFirstOom: true, ...(p.loop !== undefined && { loop: p.loop }) })
              .ooms;
    } finally {
      made.allocator.dispose();
    }
    const reason = notRankedReason(memory);
    const row: DoctorStrategy = {
      label: spec.label,
      memory,
      ranked: reason === undefined,
      fits: ooms === 0,
      ...(addressOnly && { addressOnly }),
    };
    if (reason !== undefined) row.notRankedReason = reason;
    const minCapacity = findMinCapacity(p.compiled, spec, {
      capBytes: Math.max(p.searchCap - p.heldBefore, p.compiled.peakAllocatedBytes),
      resolutionBytes: p.resolutionBytes,
      ...(p.loop !== undefined && { loop: p.loop }),
      ...(addressOnly && { addressOnly }),
    });
    row.minCapacity = minCapacity;
    if (minCapacity.bytes !== undefined) row.needBytes = minCapacity.bytes + p.heldBefore;
    // it fitted at the capacity: that bounds its need, whatever the search's resolution left
    if (ooms === 0) row.needBytes = Math.min(row.needBytes ?? Number.POSITIVE_INFINITY, p.replayCapacity + p.heldBefore);
    return row;
  } catch (e) {
    const reason = notRankedReason(memory);
    return {
      label: spec.label,
      memory,
      ranked: reason === undefined,
      ...(reason !== undefined && { notRankedReason: reason }),
      error: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
    };
  }
}

/**
 * `row` with the band of its need (by a model erring by `relativeError`) and where the capacity
 * falls against it. The search's gap is what lies between its last failure and its need.
 */
function withBand(
  row: DoctorStrategy,
  p: Probe,
  relativeError: number,
  outside: OutsideMemory,
  capacityBytes: number,
  errorFloorBytes = 0,
): DoctorStrategy {
  if (row.error !== undefined) return row;
  if (row.needBytes === undefined) return { ...row, call: 'does-not-fit' }; // over the search's cap, itself at least the capacity
  const failed = row.minCapacity?.failedBytes;
  const gap = failed === undefined ? 0 : Math.max(0, row.needBytes - (failed + 1 + p.heldBefore));
  const band = needBand(row.needBytes, gap, relativeError, outside, errorFloorBytes);
  return { ...row, band, call: bandCall(band, capacityBytes) };
}

/** Whether two specs name the same strategy with the same options. */
const sameSpec = (a: LabelledStrategySpec, b: LabelledStrategySpec) =>
  a.name === b.name && JSON.stringify(a.options ?? {}) === JSON.stringify(b.options ?? {});

const names = (list: readonly string[]) => (list.length <= 1 ? (list[0] ?? '') : `${list.slice(0, -1).join(', ')} and ${list.at(-1)}`);

/** "2.00 MiB to spare" or "2.00 MiB over". */
const margin = (bytes: number) => (bytes >= 0 ? `${formatBytes(bytes)} to spare` : `${formatBytes(-bytes)} over`);

/** What would bring the live bytes under the capacity, with the trace's figures. */
function reductionsOf(c: CompiledTrace, capacityBytes: number, heldBefore: number, liveBytes: number): DoctorReduction[] {
  const target = capacityBytes - heldBefore; // for the trace's own bytes
  const out: DoctorReduction[] = [];
  const plan = (by: 'tag' | 'stream') => {
    const p = offDevicePlan(c, by, target, by === 'tag' ? [otherFrameTag] : []);
    if (p === undefined) return;
    const liveAfter = p.peakBytes + heldBefore;
    out.push({
      kind: by === 'tag' ? 'tiered-by-tag' : 'tiered-by-stream',
      groups: p.groups,
      savedBytes: Math.max(0, liveBytes - liveAfter),
      liveAfterBytes: liveAfter,
      reaches: liveAfter <= capacityBytes,
      exact: true,
      text:
        `Tiered placement by ${by}: with the allocations of ${names(p.groups)} (${formatBytes(p.movedAtPeakBytes)} at the peak) in host memory ` +
        `(the tiered strategy, place('host') around them), the live bytes left on the device peak at ${formatBytes(liveAfter)}, ` +
        `${liveAfter <= capacityBytes ? `${formatBytes(capacityBytes - liveAfter)} under` : `still ${formatBytes(liveAfter - capacityBytes)} over`} the capacity ` +
        '(exact from the trace; the device allocator adds its own overhead, and kernels read those bytes over the bus).',
    });
  };
  plan('tag');
  if (c.streamIds.length > 1) plan('stream');
  const idle = idleTagsAbove(c, target);
  if (idle !== undefined && idle.tags.length > 0) {
    const liveAfter = idle.peakBytes + heldBefore;
    out.push({
      kind: 'sleep-idle-tags',
      groups: idle.tags,
      savedBytes: Math.max(0, liveBytes - liveAfter),
      liveAfterBytes: liveAfter,
      reaches: false, // an estimate (see DoctorReduction.reaches)
      exact: false,
      text:
        `Sleeping idle tags: ${names(idle.tags)} hold ${formatBytes(idle.heldAtPeakBytes)} at the peak and allocate or free nothing while the live bytes exceed the capacity; ` +
        `asleep over those stretches (sleep by tag, woken after), the live bytes would peak at ${formatBytes(liveAfter)} ` +
        '(an estimate: the trace records allocations and frees, not kernels, so a tag idle in the allocator may still be read there).',
    });
  }
  const transient = transientAtPeak(c);
  if (transient !== undefined && transient.bytes > 0) {
    const liveAfter = liveBytes - transient.bytes;
    out.push({
      kind: 'checkpointing',
      savedBytes: transient.bytes,
      liveAfterBytes: liveAfter,
      reaches: false, // an upper bound on the saving (see DoctorReduction.reaches)
      exact: false,
      text:
        `Activation checkpointing: ${formatBytes(transient.bytes)} of the live bytes at the peak are the step's own (freed later in the trace before its teardown, or allocated after the trough before the peak): ` +
        `activations, gradients and temporaries; checkpointing keeps fewer activations and recomputes them, so it removes part of that, down to ${formatBytes(liveAfter)} at the very best ` +
        `(an upper bound on the saving: the trace does not say which of these bytes are activations; ${formatBytes(transient.standingBytes)} are standing state such as weights and optimizer state).`,
    });
  }
  return out;
}

/**
 * Diagnoses an out-of-memory failure, or a program's fit, on a device of `capacityBytes`: the peak of
 * live bytes, each strategy's replay at the capacity and minimum capacity, PyTorch's default
 * allocator modelled with its free-cached-and-retry, a band around each need (the memory outside
 * the allocator, the model's error: see {@link NeedBand}), and exactly one verdict:
 * - `real`: the live bytes with the least memory outside the allocator exceed the capacity (by `excessBytes`);
 *   `reductions` says what would bring them down;
 * - `fragmentation`: the live bytes fit, PyTorch's default does not (the capacity is under its band); `best` names
 *   the ranked strategy needing the least (which may itself not fit: then `reductions` too);
 * - `fits`: PyTorch's default fits (the capacity covers its band); `best` names the ranked strategy needing the least, with its margin;
 * - `too-close`: the capacity lies inside the band of the need that decides (`decision`: the live bytes, else
 *   PyTorch's default): too close to call either way.
 * Strategies that keep their memory in host memory or spill to it are replayed and listed, not ranked.
 * Replays go through the allocators (host twins without a GPU or with `hostTwins`); nothing is read or written.
 */
export function diagnoseOom(trace: AllocationTrace, options: DoctorOptions): DoctorVerdict {
  const capacityBytes = options.capacityBytes;
  if (!Number.isSafeInteger(capacityBytes) || capacityBytes <= 0)
    throw new RangeError(`Expected a positive integer for capacityBytes but received ${String(capacityBytes)}`);
  const handling = options.failedRequests ?? 'replay';
  if (handling !== 'replay' && handling !== 'skip')
    throw new TypeError(`Expected one of 'replay', 'skip' for failedRequests but received ${String(handling)}`);
  const failed = trace.events.reduce((n, e) => n + (e.action === 'oom' ? 1 : 0), 0);
  const events = handling === 'replay' && failed > 0 ? withFailedRequests(trace.events) : trace.events;
  const compiled = compileTrace(failed > 0 && handling === 'replay' ? { header: trace.header, events } : trace);
  const snapshot = snapshotOf(trace);
  const heldBefore = snapshot?.allocatedBeforeHistoryBytes ?? 0;
  const liveBytes = Math.max(livePeak(events, heldBefore), compiled.peakAllocatedBytes);
  const resolutionBytes = options.resolutionBytes ?? defaultResolution(capacityBytes);
  const probe: Probe = {
    compiled,
    replayCapacity: capacityBytes - heldBefore,
    heldBefore,
    resolutionBytes,
    searchCap: Math.min(Math.max(capacityBytes, 2 * liveBytes), options.searchLimitBytes ?? Number.POSITIVE_INFINITY),
    ...(options.loop !== undefined && { loop: options.loop }),
    hostTwins: options.hostTwins === true,
  };

  const outside = options.outside ?? defaultOutsideMemory;
  checkOutsideMemory(outside);
  const pytorchModelError = options.pytorchModelError ?? defaultPytorchModelError;
  checkRelativeError(pytorchModelError, 'pytorchModelError');
  const pytorchModelErrorFloorBytes = options.pytorchModelErrorFloorBytes ?? defaultPytorchModelErrorFloorBytes;
  if (!Number.isSafeInteger(pytorchModelErrorFloorBytes) || pytorchModelErrorFloorBytes < 0)
    throw new RangeError(
      `Expected a non-negative integer for pytorchModelErrorFloorBytes but received ${String(pytorchModelErrorFloorBytes)}`,
    );
  const strategyModelError = options.strategyModelError ?? defaultStrategyModelError;
  checkRelativeError(strategyModelError, 'strategyModelError');
  const banded = (row: DoctorStrategy, error: number, floor = 0) => withBand(row, probe, error, outside, capacityBytes, floor);

  const rows = options.strategies.map((spec) => banded(examine(spec, probe), strategyModelError));
  const model = options.pytorchModel ?? pytorchTwin(snapshot?.allocatorSettings);
  const modelIndex = options.strategies.findIndex((s) => sameSpec(s, model));
  const pytorchRow = modelIndex >= 0 ? rows[modelIndex]! : examine(model, probe);
  const recorded = recordedPeakReserved(trace);
  // the model's row as its own, banded with the model's error rather than the strategy's
  const { band: _strategyBand, call: _strategyCall, ...modelRow } = pytorchRow;
  const pytorch: DoctorVerdict['pytorch'] = {
    ...banded(modelRow, pytorchModelError, pytorchModelErrorFloorBytes),
    ...(recorded !== undefined && { recordedPeakReservedBytes: recorded }),
  };
  const order = (r: DoctorStrategy) => (r.ranked ? 0 : 1);
  rows.sort((a, b) => order(a) - order(b) || (a.needBytes ?? Number.POSITIVE_INFINITY) - (b.needBytes ?? Number.POSITIVE_INFINITY));

  const ranked = rows.filter((r) => r.ranked && r.error === undefined && r.band !== undefined);
  const bestRow = ranked[0]; // sorted by need
  const best = bestRow && {
    label: bestRow.label,
    needBytes: bestRow.needBytes!,
    marginBytes: capacityBytes - bestRow.needBytes!,
    fits: bestRow.call === 'fits',
    band: bestRow.band!,
    call: bestRow.call!,
  };

  // The live bytes decide first (nothing needs less), then PyTorch's default as modelled, or, when
  // its replay failed, the best ranked strategy. A capacity inside the deciding band is too close.
  const pytorchName =
    options.pytorchModel === undefined
      ? "PyTorch's default allocator (replayed by its twin, the caching strategy)"
      : `PyTorch's default allocator (modelled by ${pytorch.label})`;
  const liveBand = needBand(liveBytes, 0, 0, outside);
  const decision: DoctorDecision = (() => {
    const of = (by: DoctorDecision['by'], label: string, band: NeedBand, call: BandCall): DoctorDecision => ({
      by,
      label,
      band,
      call,
      marginBytes: bandMargin(band, capacityBytes),
    });
    const liveCall = bandCall(liveBand, capacityBytes);
    if (liveCall !== 'fits') return of('live', 'the live bytes', liveBand, liveCall);
    if (pytorch.error === undefined && pytorch.band !== undefined) return of('pytorch', pytorchName, pytorch.band, pytorch.call!);
    if (pytorch.error === undefined || best === undefined) {
      // no need known under the search's cap: it does not fit; the band is the cap's
      const band = needBand(Math.max(probe.searchCap, capacityBytes + 1), 0, 0, outside);
      return of(
        pytorch.error === undefined ? 'pytorch' : 'best',
        pytorch.error === undefined ? pytorchName : 'no ranked strategy',
        band,
        'does-not-fit',
      );
    }
    return of('best', best.label, best.band, best.call);
  })();
  const kind: DoctorVerdictKind =
    decision.call === 'too-close' ? 'too-close' : decision.by === 'live' ? 'real' : decision.call === 'fits' ? 'fits' : 'fragmentation';

  const lines: string[] = [];
  const need = (r: DoctorStrategy) => (r.needBytes !== undefined ? formatBytes(r.needBytes) : `more than ${formatBytes(probe.searchCap)}`);
  const band = (b: NeedBand) => `${formatBytes(b.lowBytes)} to ${formatBytes(b.highBytes)} on the device`;
  const called = (c: BandCall | undefined) => (c === 'fits' ? 'fits' : c === 'too-close' ? 'is too close to call' : 'does not fit');
  const pytorchLine =
    pytorch.error !== undefined
      ? `${pytorchName} could not be replayed: ${pytorch.error.split('\n')[0]}.`
      : `${pytorchName} ${called(pytorch.call)}: it needs ${need(pytorch)}${pytorch.band !== undefined ? ` (${band(pytorch.band)}), ${margin(capacityBytes - pytorch.band.highBytes)} at the band's top` : ''}.`;
  const live = `the live bytes peak at ${formatBytes(liveBytes)}`;
  if (kind === 'too-close') {
    const d = decision;
    lines.push(
      `Too close to call: ${d.label === 'the live bytes' ? live : `${d.label} needs ${formatBytes(d.band.needBytes)}`}, which with the memory outside the allocator ` +
        `(${formatBytes(d.band.outsideLowBytes)} to ${formatBytes(d.band.outsideHighBytes)})${d.band.modelErrorBytes > 0 ? ` and the model's error (±${formatBytes(d.band.modelErrorBytes)})` : ''} ` +
        `makes ${band(d.band)}; the capacity of ${formatBytes(capacityBytes)} lies inside that band, ${margin(d.marginBytes)} its middle. ` +
        'Measure the memory outside the allocator on this machine (--outside) to narrow it, or run it.',
    );
    if (d.by !== 'live' && best)
      lines.push(
        `The best ranked strategy, ${best.label}, ${called(best.call)}: it needs ${formatBytes(best.needBytes)} (${band(best.band)}).`,
      );
  } else if (kind === 'real') {
    lines.push(
      liveBytes > capacityBytes
        ? `Real: ${live}, ${formatBytes(liveBytes - capacityBytes)} more than the capacity of ${formatBytes(capacityBytes)}; no allocator can run this program in it as it is.`
        : `Real: ${live}, which with at least ${formatBytes(outside.lowBytes)} outside the allocator is ${formatBytes(liveBand.lowBytes - capacityBytes)} more than the capacity of ${formatBytes(capacityBytes)}; no allocator can run this program in it as it is.`,
    );
  } else if (kind === 'fragmentation') {
    lines.push(
      `Fragmentation: ${live}, under the capacity of ${formatBytes(capacityBytes)}, but ${pytorchName} needs ${need(pytorch)}: ` +
        'memory it holds in blocks no request can use, even after it frees its cached segments and retries.',
    );
    if (best?.fits) lines.push(`${best.label} fits in ${formatBytes(best.needBytes)} (${band(best.band)}), ${margin(best.marginBytes)}.`);
    else if (best?.call === 'too-close')
      lines.push(
        `The closest ranked strategy, ${best.label}, is too close to call: it needs ${formatBytes(best.needBytes)} (${band(best.band)}).`,
      );
    else if (best)
      lines.push(
        `No ranked strategy fits either: the closest, ${best.label}, needs ${formatBytes(best.needBytes)} (${margin(best.marginBytes)}).`,
      );
    else lines.push("No ranked strategy fitted under the search's cap.");
  } else {
    lines.push(
      best
        ? `Fits: under ${best.label}, which needs ${formatBytes(best.needBytes)} (${band(best.band)}) of ${formatBytes(capacityBytes)}, ${margin(best.marginBytes)}; ${live}.`
        : `Fits: ${pytorchName} runs it in ${formatBytes(capacityBytes)}; ${live}.`,
    );
  }
  if (kind !== 'fragmentation') lines.push(pytorchLine);

  const target = capacityBytes - heldBefore;
  // what the live bytes must come under: the capacity less the most memory outside the allocator
  const reductions =
    kind === 'real' || (kind === 'too-close' && decision.by === 'live') || (kind === 'fragmentation' && !best?.fits)
      ? reductionsOf(compiled, Math.max(0, capacityBytes - outside.highBytes), heldBefore, liveBytes)
      : [];
  if (reductions.length > 0) {
    lines.push('What would reduce the live bytes:', ...reductions.map((r) => `- ${r.text}`));
  } else if (kind === 'real') {
    lines.push(
      'The trace names no tags or streams to move and nothing freed around its peak: fewer or smaller allocations (a smaller batch) are what is left.',
    );
  }

  const notes: string[] = [
    `Live bytes count each block until its free completed where the format records it (a PyTorch snapshot's free_completed); no allocator needs less than their peak.`,
    options.pytorchModel === undefined
      ? `PyTorch's default caching allocator is modelled by its twin, ${pytorch.label}: CUDACachingAllocator's rounding, small and large pools, best fit per stream, splitting, and when a segment cannot be had its release of cached segments and retry, with the settings the recording ran under; replayed at the capacity. The peak it reserved in the recording, with no limit, is not its need, since it keeps freed blocks cached until a request fails.`
      : `PyTorch's default caching allocator is modelled by ${pytorch.label}, replayed at the capacity; the peak it reserved in the recording, with no limit, is not its need, since it keeps freed blocks cached until a request fails.`,
    `Minimum capacities are found by bisection to within ${formatBytes(resolutionBytes)}; a strategy that fitted at the capacity needs at most the capacity.`,
  ];
  const width = decision.band.highBytes - decision.band.lowBytes;
  notes.push(
    `Every need has a band: the device memory the program needs under it is the allocator's need, ± the model's error (PyTorch's model ${(100 * pytorchModelError).toFixed(2)}% and ${formatBytes(pytorchModelErrorFloorBytes)} at the least, gpumem's strategies ${(100 * strategyModelError).toFixed(2)}%: their replay runs their own code), ` +
      `less the search's gap, plus the memory outside the allocator, ${formatBytes(outside.lowBytes)} to ${formatBytes(outside.highBytes)} (${outside.source}). ` +
      `A capacity inside the band of the need that decides is too close to call. The deciding band here is ${formatBytes(width)} wide, ${((100 * width) / capacityBytes).toFixed(2)}% of the capacity` +
      (width > capacityBytes / 100
        ? `: more than 1%, from ${decision.band.modelErrorBytes * 2 > outside.highBytes - outside.lowBytes ? "the model's error" : 'the spread of the memory outside the allocator'} (--outside LOW..HIGH as measured here narrows it).`
        : '.'),
  );
  if (recorded !== undefined) notes.push(`The recording reserved ${formatBytes(recorded)} at most under PyTorch, with no limit.`);
  if (snapshot?.allocatorSettings?.expandable_segments === true && options.pytorchModel === undefined)
    notes.push('The recording ran with expandable_segments:True: the twin replays it with expandable segments too.');
  if (heldBefore > 0)
    notes.push(
      `The history starts mid-run: ${formatBytes(heldBefore)} allocated before it are counted as held for all of it in every replay (an estimate on the high side: some are freed during it).`,
    );
  if (failed > 0)
    notes.push(
      handling === 'replay'
        ? `${failed} request${failed === 1 ? '' : 's'} failed in the recording: each is replayed as an allocation freed at once, the least the program asked for there.`
        : `${failed} request${failed === 1 ? '' : 's'} failed in the recording and ${failed === 1 ? 'is' : 'are'} left out: the figures are those of the program without them.`,
    );
  if (target < compiled.largestRequestBytes && kind !== 'real')
    notes.push(`The largest single request, ${formatBytes(compiled.largestRequestBytes)}, does not fit in what the capacity leaves.`);
  const hostBound = rows.filter((r) => r.ranked && r.addressOnly !== true && r.error === undefined).map((r) => r.label);
  if (probe.hostTwins)
    notes.push(
      "Replayed on the strategies' host twins (the same logic), over address-only memory where a strategy runs on addresses alone (they take no memory): the same verdict on any machine." +
        (hostBound.length > 0
          ? ` ${names(hostBound)} replayed over this machine's host memory (no address-only leaf): a failure of the host there would read as out of memory.`
          : ''),
    );
  else if (!hasCudaDevice())
    notes.push('Replayed without a GPU: the device strategies ran on their host twins (the same logic over host memory).');
  const notRanked = rows.filter((r) => !r.ranked);
  if (notRanked.length > 0) notes.push(`Not ranked: ${notRanked.map((r) => `${r.label} (${r.notRankedReason})`).join('; ')}.`);
  const failedRows = rows.filter((r) => r.error !== undefined);
  if (failedRows.length > 0) notes.push(`Failed: ${failedRows.map((r) => `${r.label} (${r.error!.split('\n')[0]})`).join('; ')}.`);

  return {
    kind,
    capacityBytes,
    decision,
    uncertainty: { outside, pytorchModelError, pytorchModelErrorFloorBytes, strategyModelError },
    liveBytes,
    heldBeforeTraceBytes: heldBefore,
    largestRequestBytes: compiled.largestRequestBytes,
    failedRequests: { count: failed, handling },
    strategies: rows,
    pytorch,
    ...(best && { best }),
    ...(kind === 'real' && { excessBytes: liveBand.lowBytes - capacityBytes }),
    peak: {
      byTag: peakByTag(compiled).map((p) => ({ name: p.tag, bytes: p.bytes })),
      byStream: peakByStream(compiled),
      bySizeClass: peakBySizeClass(compiled),
      ...(() => {
        const t = transientAtPeak(compiled);
        return t ? { transient: t } : {};
      })(),
    },
    reductions,
    lines,
    notes,
  };
}

/** Where a default capacity came from. */
export interface RecordedCapacity {
  bytes: number;
  /** In words, for the output. */
  source: string;
}

/**
 * The capacity a PyTorch snapshot records: at its first out-of-memory entry, what PyTorch reserved
 * plus what the driver still had free (`device_free`), i.e. the memory its allocator could have had
 * on that device. Undefined for other traces and snapshots without such an entry.
 */
export function recordedCapacity(trace: AllocationTrace): RecordedCapacity | undefined {
  const oom = snapshotOf(trace)?.firstOom;
  if (oom === undefined) return undefined;
  return {
    bytes: oom.reservedBytes + oom.deviceFreeBytes,
    source: `the snapshot's first out-of-memory entry: ${formatBytes(oom.reservedBytes)} reserved by PyTorch + ${formatBytes(oom.deviceFreeBytes)} free on the device`,
  };
}
