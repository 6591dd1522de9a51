/**
 * The answer after the numbers: which strategy to use for the replayed program, for memory, for
 * driver calls and for speed, and by how much each beats the allocator the program was recorded
 * under (PyTorch's caching allocator, from a snapshot) where that is known.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';

/** One replayed strategy, as the advice sees it (failed strategies are left out by the caller). */
export interface AdviceCandidate {
  /** The strategy as given, with its options: `pool`, `pool:maxReservedBytes=1GiB`. */
  label: string;
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
export interface AdvicePeer {
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
  peer?: AdvicePeer;
}

/** One pick: the strategies holding the best value (ties), the value, and against the peer. */
export interface AdvicePick {
  labels: string[];
  value: number;
  /** The peer's value, and the share by which the pick is below it (negative: above it). */
  peer?: { value: number; lessBy: number };
}

/** The recommendation: each pick, and the lines to print. */
export interface Advice {
  memory?: AdvicePick;
  driverCalls?: AdvicePick;
  speed?: AdvicePick;
  lines: string[];
}

function best(candidates: readonly AdviceCandidate[], value: (c: AdviceCandidate) => number | undefined): AdvicePick | undefined {
  const scored = candidates.map((c) => [c, value(c)] as const).filter((p): p is readonly [AdviceCandidate, number] => p[1] !== undefined);
  if (scored.length === 0) return undefined;
  const min = Math.min(...scored.map((p) => p[1]));
  return { labels: scored.filter((p) => p[1] === min).map((p) => p[0].label), value: min };
}

function withPeer(pick: AdvicePick | undefined, peerValue: number | undefined): AdvicePick | undefined {
  if (pick === undefined || peerValue === undefined) return pick;
  return { ...pick, peer: { value: peerValue, lessBy: peerValue > 0 ? (peerValue - pick.value) / peerValue : 0 } };
}

function names(labels: readonly string[]): string {
  return labels.length <= 1 ? (labels[0] ?? '') : `${labels.slice(0, -1).join(', ')} and ${labels.at(-1)}`;
}

/** "18% less than PyTorch's 17.8 GiB" and the like; `fewer`/`more` for counts. */
function versus(pick: AdvicePick, peer: AdvicePeer, what: (v: number) => string, less: string, more: string): string {
  const p = pick.peer!;
  if (p.value === pick.value) return `the same as ${peer.name}'s ${what(p.value)}`;
  const percent = Math.round(Math.abs(p.lessBy) * 100);
  const amount = percent === 0 ? '<1%' : `${percent}%`;
  return `${amount} ${p.lessBy > 0 ? less : more} than ${peer.name}'s ${what(p.value)}`;
}

const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;

/**
 * Picks the strategy with the least memory (the smallest minimum capacity when it was searched,
 * else the smallest peak reserved), the fewest driver calls and the fastest calls, among the
 * strategies that replayed the whole trace without running out of memory, and says by how much
 * each pick beats the peer, when there is one.
 */
export function adviseAllocator(candidates: readonly AdviceCandidate[], context: AdviceContext): Advice {
  const { peer } = context;
  const lines: string[] = [];
  const advice: Advice = { lines };
  const verb = (labels: readonly string[]) => (labels.length > 1 ? 'need' : 'needs');

  const memory = context.minCapacity
    ? best(candidates, (c) => c.minCapacityBytes)
    : best(candidates.filter((c) => c.ooms === 0), (c) => c.peakReservedBytes);
  advice.memory = withPeer(memory, peer?.peakReservedBytes);
  if (advice.memory) {
    const m = advice.memory;
    const how = context.minCapacity ? `${verb(m.labels)} ${formatBytes(m.value)}` : `${m.labels.length > 1 ? 'peak' : 'peaks'} at ${formatBytes(m.value)} reserved`;
    lines.push(`Least memory: ${names(m.labels)} ${how}${peer ? `, ${versus(m, peer, formatBytes, 'less', 'more')}` : ''}.`);
  } else if (context.minCapacity) {
    lines.push('Least memory: no strategy replayed the trace without running out of memory under the search\'s cap.');
  }

  const fitting = candidates.filter((c) => c.ooms === 0);
  if (fitting.length === 0) {
    const at = context.capacityBytes !== undefined ? ` at ${formatBytes(context.capacityBytes)}` : '';
    lines.push(`No strategy replayed the whole trace without running out of memory${at}; --min-capacity finds how much each needs.`);
    return advice;
  }
  advice.driverCalls = withPeer(best(fitting, (c) => c.driverCalls), peer?.driverCalls);
  const d = advice.driverCalls!;
  lines.push(`Fewest driver calls: ${names(d.labels)}, ${plural(d.value, 'call')}${peer ? `, ${versus(d, peer, (v) => plural(v, 'call'), 'fewer', 'more')}` : ''}.`);

  advice.speed = best(fitting, (c) => c.nsPerCall);
  const s = advice.speed!;
  const runnerUp = best(fitting.filter((c) => !s.labels.includes(c.label)), (c) => c.nsPerCall);
  const next = runnerUp ? ` (next: ${names(runnerUp.labels)}, ${Math.round(runnerUp.value)} ns)` : '';
  lines.push(`Fastest calls: ${names(s.labels)}, ${Math.round(s.value)} ns per call on average${next}.`);
  return advice;
}
