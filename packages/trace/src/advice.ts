/**
 * The answer after the numbers: which strategy to use for the replayed program, for memory, for
 * driver calls and for speed, and by how much each beats the allocator the program was recorded
 * under (PyTorch's caching allocator, from a snapshot) where that is known.
 * @module
 */
import { formatBytes, strategyInfo } from '@gpumem/allocator-core';

/**
 * Where a strategy keeps the memory it hands out, as its registration says:
 * - `device`: GPU memory (on a machine without a GPU, its host twin stands in for it);
 * - `host`: host memory (`hostMemory`: plain or pinned host memory, not the GPU's);
 * - `spills`: the device first, then host memory past it (`spillsToHost`, e.g. 'tiered'): it can
 *   run in less device memory than a device strategy by holding the rest in host memory.
 */
export type StrategyMemory = 'device' | 'host' | 'spills';

/** Where the registered strategy `name` keeps its memory, from its registry flags. */
export function strategyMemory(name: string): StrategyMemory {
  const info = strategyInfo(name);
  if (info.hostMemory) return 'host';
  return info.spillsToHost ? 'spills' : 'device';
}

/** A strategy that was not replayed (no GPU, a failure), and why. */
export interface SkippedStrategy {
  label: string;
  reason: string;
}

/** One replayed strategy, as the advice sees it (failed strategies are left out by the caller). */
export interface AdviceCandidate {
  /** The strategy as given, with its options: `pool`, `pool:maxReservedBytes=1GiB`. */
  label: string;
  /**
   * Where its memory lives (default 'device'). Only device strategies compete for the least
   * memory; host strategies compete for nothing (their memory is not the GPU's); strategies that
   * spill compete for driver calls and speed, and get a line of their own with what they spilled.
   */
  memory?: StrategyMemory;
  /**
   * A strategy that spills: the most bytes its host tier held in the tracked pass (its peak host
   * reserved), when it reports them.
   */
  spilledBytes?: number;
  /** Out-of-memory failures in the timed replay (at the simulated capacity, if one was given). */
  ooms: number;
  peakReservedBytes: number;
  /** The minimum capacity found; undefined when it was not searched or never fit under the cap. */
  minCapacityBytes?: number;
  /** Driver (upstream) allocations and frees over one pass. */
  driverCalls: number;
  /** Mean time of one call (allocations and frees together), ns. */
  nsPerCall: number;
}

/** The recorded allocator the strategies are measured against. */
export interface AdviceBaseline {
  /** How the text names it: "PyTorch". */
  name: string;
  /** Its peak reserved bytes: also its minimum capacity, since it ran the program in that much. */
  peakReservedBytes: number;
  driverCalls: number;
}

/** How the advice was asked for. */
export interface AdviceContext {
  /** True when --min-capacity ran: memory is ranked by minimum capacity, else by peak reserved. */
  minCapacity: boolean;
  /** The simulated capacity of the timed replay, if any. */
  capacityBytes?: number;
  baseline?: AdviceBaseline;
  /** Strategies that were not replayed (no GPU, a failure): named in a caveat. */
  skipped?: readonly SkippedStrategy[];
  /** True when there was no GPU: device strategies ran on their host twins (a caveat says so). */
  withoutGpu?: boolean;
}

/** One pick: the strategies holding the best value (ties), the value, and against the baseline. */
export interface AdvicePick {
  labels: string[];
  value: number;
  /** The baseline's value, and the share by which the pick is below it (negative: above it). */
  baseline?: { value: number; lessBy: number };
}

/** The recommendation: each pick, and the lines to print. */
export interface Advice {
  /** Among device strategies only. */
  memory?: AdvicePick;
  /** Among device strategies and those that spill. */
  driverCalls?: AdvicePick;
  speed?: AdvicePick;
  /** Strategies left out of the picks because of where their memory lives, and why. */
  notRanked: SkippedStrategy[];
  /** Strategies that were not replayed (as given in the context). */
  skipped: SkippedStrategy[];
  /** What the picks do not cover: skipped strategies, host twins standing in for the GPU. */
  caveats: string[];
  lines: string[];
}

function best(candidates: readonly AdviceCandidate[], value: (c: AdviceCandidate) => number | undefined): AdvicePick | undefined {
  const scored = candidates.map((c) => [c, value(c)] as const).filter((p): p is readonly [AdviceCandidate, number] => p[1] !== undefined);
  if (scored.length === 0) return undefined;
  const min = Math.min(...scored.map((p) => p[1]));
  return { labels: scored.filter((p) => p[1] === min).map((p) => p[0].label), value: min };
}

function withBaseline(pick: AdvicePick | undefined, baselineValue: number | undefined): AdvicePick | undefined {
  // A baseline that recorded nothing (a snapshot without segment entries) is no yardstick.
  if (pick === undefined || baselineValue === undefined || baselineValue <= 0) return pick;
  return { ...pick, baseline: { value: baselineValue, lessBy: (baselineValue - pick.value) / baselineValue } };
}

function names(labels: readonly string[]): string {
  return labels.length <= 1 ? (labels[0] ?? '') : `${labels.slice(0, -1).join(', ')} and ${labels.at(-1)}`;
}

/** "18% less than PyTorch's 17.8 GiB" and the like; `fewer`/`more` for counts. */
function versus(pick: AdvicePick, baseline: AdviceBaseline, what: (v: number) => string, less: string, more: string): string {
  const p = pick.baseline!;
  if (p.value === pick.value) return `the same as ${baseline.name}'s ${what(p.value)}`;
  const percent = Math.round(Math.abs(p.lessBy) * 100);
  const amount = percent === 0 ? '<1%' : `${percent}%`;
  return `${amount} ${p.lessBy > 0 ? less : more} than ${baseline.name}'s ${what(p.value)}`;
}

const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;

/** Lines about the strategies left out of the picks for where their memory lives. */
function notRankedLines(candidates: readonly AdviceCandidate[], notRanked: SkippedStrategy[]): string[] {
  const lines: string[] = [];
  const host = candidates.filter((c) => c.memory === 'host');
  if (host.length > 0) {
    const labels = host.map((c) => c.label);
    for (const label of labels) notRanked.push({ label, reason: 'keeps its memory in host memory, not on the GPU' });
    lines.push(`Not ranked: ${names(labels)} ${labels.length > 1 ? 'keep their' : 'keeps its'} memory in host memory, not on the GPU.`);
  }
  for (const c of candidates.filter((c) => c.memory === 'spills')) {
    const spilled =
      c.spilledBytes === undefined
        ? ''
        : c.spilledBytes > 0
          ? ` (${formatBytes(c.spilledBytes)} at most in the tracked pass)`
          : ' (none in the tracked pass)';
    notRanked.push({ label: c.label, reason: 'spills to host memory past the device: its minimum capacity counts on host memory' });
    lines.push(
      `Not ranked for memory: ${c.label} holds what does not fit on the device in host memory${spilled}, so its minimum capacity counts on host memory; it trades device memory for transfers over the bus.`,
    );
  }
  return lines;
}

/** What the picks do not cover. */
function caveatsOf(context: AdviceContext): string[] {
  const caveats: string[] = [];
  const skipped = context.skipped ?? [];
  if (skipped.length > 0) {
    const byReason = new Map<string, string[]>();
    for (const s of skipped) byReason.set(s.reason, [...(byReason.get(s.reason) ?? []), s.label]);
    const parts = [...byReason].map(([reason, labels]) => `${names(labels)} (${reason})`);
    caveats.push(`Not replayed, so not compared: ${parts.join('; ')}.`);
  }
  if (context.withoutGpu) {
    caveats.push(
      "Replayed without a GPU: the device strategies ran on their host twins (the same logic over host memory); times are not a GPU's.",
    );
  }
  return caveats;
}

/**
 * Picks the strategy with the least memory (the smallest minimum capacity when it was searched,
 * else the smallest peak reserved) among those that keep their memory on the device, and the
 * fewest driver calls and the fastest calls among those that use the device (spilling ones too),
 * all among the strategies that replayed the whole trace without running out of memory, and says
 * by how much each pick beats the baseline, when there is one. Strategies that keep their memory in
 * host memory are not ranked, and those that spill to it get a line with what they spilled; a
 * caveat names the strategies that were not replayed.
 */
export function adviseAllocator(all: readonly AdviceCandidate[], context: AdviceContext): Advice {
  const { baseline } = context;
  const lines: string[] = [];
  const notRanked: SkippedStrategy[] = [];
  const caveats = caveatsOf(context);
  const advice: Advice = { lines, notRanked, skipped: [...(context.skipped ?? [])], caveats };
  const verb = (labels: readonly string[]) => (labels.length > 1 ? 'need' : 'needs');
  const onDevice = all.filter((c) => (c.memory ?? 'device') === 'device');
  const candidates = all.filter((c) => c.memory !== 'host');
  const tail = () => {
    lines.push(...notRankedLines(all, notRanked), ...caveats.map((c) => `Caveat: ${c.charAt(0).toLowerCase()}${c.slice(1)}`));
    return advice;
  };

  if (all.length === 0) {
    lines.push('No strategy was replayed, so there is nothing to recommend.');
    return tail();
  }
  const memory = context.minCapacity
    ? best(onDevice, (c) => c.minCapacityBytes)
    : best(
        onDevice.filter((c) => c.ooms === 0),
        (c) => c.peakReservedBytes,
      );
  advice.memory = withBaseline(memory, baseline?.peakReservedBytes);
  if (advice.memory) {
    const m = advice.memory;
    const how = context.minCapacity
      ? `${verb(m.labels)} ${formatBytes(m.value)}`
      : `${m.labels.length > 1 ? 'peak' : 'peaks'} at ${formatBytes(m.value)} reserved`;
    lines.push(`Least memory: ${names(m.labels)} ${how}${m.baseline ? `, ${versus(m, baseline!, formatBytes, 'less', 'more')}` : ''}.`);
  } else if (onDevice.length === 0 && all.length > 0) {
    lines.push('Least memory: no strategy that keeps its memory on the device was replayed.');
  } else if (context.minCapacity) {
    lines.push("Least memory: no strategy replayed the trace without running out of memory under the search's cap.");
  }

  const fitting = candidates.filter((c) => c.ooms === 0);
  if (fitting.length === 0) {
    if (candidates.some((c) => c.ooms > 0)) {
      const at = context.capacityBytes !== undefined ? ` at ${formatBytes(context.capacityBytes)}` : '';
      const which = all.some((c) => c.memory === 'host' && c.ooms === 0) ? 'strategy that uses the device' : 'strategy';
      lines.push(`No ${which} replayed the whole trace without running out of memory${at}; --min-capacity finds how much each needs.`);
    }
    return tail();
  }
  advice.driverCalls = withBaseline(
    best(fitting, (c) => c.driverCalls),
    baseline?.driverCalls,
  );
  const d = advice.driverCalls!;
  lines.push(
    `Fewest driver calls: ${names(d.labels)}, ${plural(d.value, 'call')}${d.baseline ? `, ${versus(d, baseline!, (v) => plural(v, 'call'), 'fewer', 'more')}` : ''}.`,
  );

  advice.speed = best(fitting, (c) => c.nsPerCall);
  const s = advice.speed!;
  const runnerUp = best(
    fitting.filter((c) => !s.labels.includes(c.label)),
    (c) => c.nsPerCall,
  );
  const next = runnerUp ? ` (next: ${names(runnerUp.labels)}, ${Math.round(runnerUp.value)} ns)` : '';
  lines.push(`Fastest calls: ${names(s.labels)}, ${Math.round(s.value)} ns per call on average${next}.`);
  return tail();
}
