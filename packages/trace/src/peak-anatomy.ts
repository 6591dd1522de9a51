/**
 * What holds the memory at a trace's peak of live bytes, and how low that peak falls when part of
 * it is kept off the device: by tag, by stream, by size class, idle tags over the stretches above a
 * capacity, and the bytes live only around the peak. The figures behind `gpumem doctor`'s "what
 * would reduce them"; every one is read from the trace's allocations and frees alone.
 * @module
 */
import type { CompiledTrace } from './replay.js';

/** Bytes live at the peak held by one group (a tag, a stream, a size class). */
export interface PeakShare {
  name: string;
  bytes: number;
}

/** The allocation size classes of {@link peakBySizeClass}: upper bounds (exclusive), the last open. */
const sizeClasses: readonly [string, number][] = [
  ['< 1 MiB', 2 ** 20],
  ['1 MiB to 16 MiB', 2 ** 24],
  ['16 MiB to 256 MiB', 2 ** 28],
  ['256 MiB to 1 GiB', 2 ** 30],
  ['>= 1 GiB', Number.POSITIVE_INFINITY],
];

/** The operation after which live bytes first reach their peak; -1 for a trace with no allocation. */
function peakOp(c: CompiledTrace): number {
  let live = 0;
  let peak = 0;
  let at = -1;
  for (let i = 0; i < c.action.length; i++) {
    live += c.action[i] === 0 ? c.bytes[i]! : -c.bytes[i]!;
    if (live > peak) {
      peak = live;
      at = i;
    }
  }
  return at;
}

/** Per slot: the operation that allocated what it holds after operation `at`, or -1 when empty then. */
function liveSlotsAfter(c: CompiledTrace, at: number): Int32Array {
  const allocOp = new Int32Array(c.slots).fill(-1);
  for (let i = 0; i <= at; i++) allocOp[c.slot[i]!] = c.action[i] === 0 ? i : -1;
  return allocOp;
}

/** The peak of live bytes when the allocations for which `skip(allocOp)` holds are left out. */
function peakWithout(c: CompiledTrace, skip: (allocOp: number) => boolean): number {
  const skipped = new Uint8Array(c.slots);
  let live = 0;
  let peak = 0;
  for (let i = 0; i < c.action.length; i++) {
    const s = c.slot[i]!;
    if (c.action[i] === 0) {
      skipped[s] = skip(i) ? 1 : 0;
      if (skipped[s] === 0) live += c.bytes[i]!;
    } else if (skipped[s] === 0) live -= c.bytes[i]!;
    peak = Math.max(peak, live);
  }
  return peak;
}

/** Bytes live at the peak by a key of their allocation operation, largest first. */
function sharesAtPeak(c: CompiledTrace, keyOf: (op: number) => string): PeakShare[] {
  const at = peakOp(c);
  const byKey = new Map<string, number>();
  for (const op of liveSlotsAfter(c, at)) if (op >= 0) byKey.set(keyOf(op), (byKey.get(keyOf(op)) ?? 0) + c.bytes[op]!);
  return [...byKey]
    .map(([name, bytes]) => ({ name, bytes }))
    .filter((s) => s.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes);
}

/** A tag's name (the trace's tag names, or `tag N` when it names none). */
const tagName = (c: CompiledTrace, tag: number) => c.tagNames?.[Math.min(tag, c.tagNames.length - 1)] ?? `tag ${tag}`;

/** Bytes live at the peak by the stream of their allocation (`stream ID`), largest first. */
export function peakByStream(c: CompiledTrace): PeakShare[] {
  return sharesAtPeak(c, (op) => `stream ${c.streamIds[c.streamIndex[op]!]}`);
}

/** Bytes live at the peak by the size class of their allocation, largest first. */
export function peakBySizeClass(c: CompiledTrace): PeakShare[] {
  return sharesAtPeak(c, (op) => sizeClasses.find(([, below]) => c.bytes[op]! < below)![0]);
}

/** Groups kept off the device, and the peak of the live bytes left on it. */
export interface OffDevicePlan {
  /** The groups moved, in the order taken (largest at the peak first). */
  groups: string[];
  /** Their bytes at the original peak. */
  movedAtPeakBytes: number;
  /** The peak of live bytes without their allocations (exact, from the trace). */
  peakBytes: number;
  /** Whether that peak is at most the target. */
  reaches: boolean;
}

/**
 * Takes tags (`by: 'tag'`) or streams off the device, the largest at the peak first, until the
 * live bytes left peak at `targetBytes` or less, or every group but one is taken; skips groups
 * named in `keep` (a catch-all such as a snapshot's 'other' frame, which names nothing to move).
 * Undefined when the trace has fewer than two such groups.
 */
export function offDevicePlan(
  c: CompiledTrace,
  by: 'tag' | 'stream',
  targetBytes: number,
  keep: readonly string[] = [],
): OffDevicePlan | undefined {
  const nameOf = by === 'tag' ? (op: number) => tagName(c, c.tag[op]!) : (op: number) => `stream ${c.streamIds[c.streamIndex[op]!]}`;
  const shares = sharesAtPeak(c, nameOf);
  const movable = shares.filter((s) => !keep.includes(s.name));
  if (shares.length < 2 || movable.length === 0) return undefined;
  const moved = new Set<string>();
  let plan: OffDevicePlan | undefined;
  for (const share of movable.slice(0, shares.length - 1)) {
    moved.add(share.name);
    const peakBytes = peakWithout(c, (op) => moved.has(nameOf(op)));
    plan = {
      groups: [...moved],
      movedAtPeakBytes: (plan?.movedAtPeakBytes ?? 0) + share.bytes,
      peakBytes,
      reaches: peakBytes <= targetBytes,
    };
    if (plan.reaches) break;
  }
  return plan;
}

/** Tags that could sleep through the stretches where live bytes exceed a capacity. */
export interface IdleTags {
  /** Tags with live bytes in those stretches and no allocation or free there. */
  tags: string[];
  /** Their bytes at the peak. */
  heldAtPeakBytes: number;
  /** The peak of live bytes with those tags asleep over the stretches (exact, from the trace). */
  peakBytes: number;
}

/**
 * The tags that make no allocation or free while live bytes exceed `targetBytes`, yet hold memory
 * then: asleep (their memory saved to the host and given back) over those stretches, the live bytes
 * would peak at `peakBytes`. Undefined when the trace names no tags or never exceeds the target.
 */
export function idleTagsAbove(c: CompiledTrace, targetBytes: number): IdleTags | undefined {
  const names = c.tagNames;
  if (!names || names.length === 0) return undefined;
  const tags = names.length;
  const n = c.action.length;
  const liveAfter = new Float64Array(n);
  let live = 0;
  for (let i = 0; i < n; i++) liveAfter[i] = live += c.action[i] === 0 ? c.bytes[i]! : -c.bytes[i]!;
  const busy = new Uint8Array(tags); // made an allocation or free above the target
  const holds = new Uint8Array(tags); // held bytes above the target
  const tagLive = new Float64Array(tags);
  let above = false;
  for (let i = 0; i < n; i++) {
    const t = Math.min(c.tag[i]!, tags - 1);
    // an operation that enters, leaves or happens inside a stretch above the target belongs to it
    const inStretch = liveAfter[i]! > targetBytes || above;
    if (inStretch) busy[t] = 1;
    tagLive[t]! += c.action[i] === 0 ? c.bytes[i]! : -c.bytes[i]!;
    above = liveAfter[i]! > targetBytes;
    if (above) for (let k = 0; k < tags; k++) if (tagLive[k]! > 0) holds[k] = 1;
  }
  const idle = [...Array(tags).keys()].filter((k) => holds[k] === 1 && busy[k] === 0);
  if (!holds.some((h) => h === 1)) return undefined;
  const asleep = new Uint8Array(tags);
  for (const k of idle) asleep[k] = 1;
  // over the stretches, the idle tags' bytes are constant (they make no call there): subtract them
  let peakBytes = 0;
  tagLive.fill(0);
  for (let i = 0; i < n; i++) {
    const t = Math.min(c.tag[i]!, tags - 1);
    tagLive[t]! += c.action[i] === 0 ? c.bytes[i]! : -c.bytes[i]!;
    let sleeping = 0;
    if (liveAfter[i]! > targetBytes) for (const k of idle) sleeping += tagLive[k]!;
    peakBytes = Math.max(peakBytes, liveAfter[i]! - sleeping);
  }
  const atPeak = new Map(sharesAtPeak(c, (op) => String(Math.min(c.tag[op]!, tags - 1))).map((s) => [Number(s.name), s.bytes]));
  return {
    tags: idle.map((k) => names[k]!),
    heldAtPeakBytes: idle.reduce((sum, k) => sum + (atPeak.get(k) ?? 0), 0),
    peakBytes,
  };
}

/** The bytes live at the peak that are the peak's own, not the program's standing state. */
export interface TransientAtPeak {
  /** Live at the peak, and freed later in the trace before its teardown, or allocated after the trough before the peak. */
  bytes: number;
  /** Live at the peak and neither: weights, optimizer state, caches (released, if at all, in the teardown). */
  standingBytes: number;
  /**
   * The operation at which the trace's teardown begins (the number of operations when it has
   * none): frees from there on release the program, not a step, and make nothing transient.
   */
  teardownOp: number;
}

/**
 * Where the teardown of `c` begins: the earlier of the first operation after the last allocation
 * (what a program frees once it allocates nothing more is its final release) and the start of the
 * final descent under `floorBytes`, the live bytes at the step boundary (after it, the live bytes
 * never come back to the standing state: what is freed there is that state). `liveAt` holds the
 * live bytes after each operation.
 */
function teardownStart(c: CompiledTrace, liveAt: Float64Array, after: number, floorBytes: number): number {
  const n = c.action.length;
  let lastAlloc = -1;
  for (let i = n - 1; i >= 0 && lastAlloc < 0; i--) if (c.action[i] === 0) lastAlloc = i;
  let descent = n;
  for (let i = n - 1; i > after && liveAt[i]! < floorBytes; i--) descent = i;
  return Math.min(lastAlloc + 1, descent);
}

/**
 * Splits the bytes live at the peak: transient (freed later in the trace before its teardown, or
 * allocated after the trough before the peak: the lowest live bytes between their first reaching
 * half the peak and the peak, the last such point; in a training loop, the step boundary before
 * the step that peaked) and standing (the rest). Frees in the teardown (see teardownStart: after
 * the last allocation, or in the final descent under the trough's live bytes) are the program
 * releasing everything at its end, not a step's own: counting them would call the weights and
 * optimizer state transient. Undefined for an empty trace.
 */
export function transientAtPeak(c: CompiledTrace): TransientAtPeak | undefined {
  const at = peakOp(c);
  if (at < 0) return undefined;
  const slots = liveSlotsAfter(c, at);
  const n = c.action.length;
  const liveAt = new Float64Array(n);
  let live = 0;
  for (let i = 0; i < n; i++) liveAt[i] = live += c.action[i] === 0 ? c.bytes[i]! : -c.bytes[i]!;
  const half = liveAt[at]! / 2;
  let trough = -1;
  for (let i = 0; i < at; i++) {
    if (trough < 0 ? liveAt[i]! >= half : liveAt[i]! <= liveAt[trough]!) trough = i;
  }
  const teardownOp = teardownStart(c, liveAt, at, trough >= 0 ? liveAt[trough]! : 0);
  const freedLater = new Uint8Array(c.slots);
  const seen = new Uint8Array(c.slots);
  for (let i = at + 1; i < teardownOp; i++) {
    const s = c.slot[i]!;
    if (seen[s] === 1) continue;
    seen[s] = 1;
    if (c.action[i] === 1 && slots[s]! >= 0) freedLater[s] = 1;
  }
  let transient = 0;
  let standing = 0;
  for (let s = 0; s < c.slots; s++) {
    const op = slots[s]!;
    if (op < 0) continue;
    if (freedLater[s] === 1 || op > trough) transient += c.bytes[op]!;
    else standing += c.bytes[op]!;
  }
  return { bytes: transient, standingBytes: standing, teardownOp };
}
