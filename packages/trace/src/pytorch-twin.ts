/**
 * The strategy that stands for PyTorch's caching allocator in a replay: `caching` (a twin of
 * CUDACachingAllocator), with the settings a snapshot recorded (`allocator_settings`:
 * expandable_segments, max_split_size, garbage_collection_threshold, roundup_power2_divisions).
 * @module
 */
import { hasAllocator, strategyInfo, strategyLabel } from '@gpumem/allocator-core';
import type { LabelledStrategySpec } from './strategy-replay.js';

/** The twin's name in the registry (the `@gpumem/allocator-caching` package registers it). */
const twinName = 'caching';

/** PyTorch's roundup_power2_divisions as a snapshot writes it ({"1": n, "2": n, ...}: MiB interval -> count), as the twin's text. */
function roundupText(value: unknown): string | undefined {
  const entries: Array<[string, unknown]> = Array.isArray(value)
    ? value.map((n, i) => [String(2 ** i), n])
    : value !== null && typeof value === 'object'
      ? Object.entries(value as Record<string, unknown>)
      : [];
  const counts = entries.filter((e): e is [string, number] => /^\d+$/.test(e[0]) && Number.isSafeInteger(e[1]) && (e[1] as number) >= 0);
  if (counts.length === 0 || counts.every(([, n]) => n === 0)) return undefined;
  counts.sort((a, b) => Number(a[0]) - Number(b[0]));
  return `[${counts.map(([mib, n]) => `${mib}:${n}`).join(',')}]`;
}

/**
 * The twin's options for PyTorch's recorded settings (none for a default run). A max_split_size of
 * SIZE_MAX (written as -1 or a number past 2^53) is PyTorch's "unset".
 */
export function pytorchTwinOptions(settings: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  if (settings === undefined) return options;
  if (settings.expandable_segments === true) options.expandableSegments = true;
  const split = settings.max_split_size;
  if (typeof split === 'number' && Number.isSafeInteger(split) && split > 0) options.maxSplitSizeBytes = split;
  const gc = settings.garbage_collection_threshold;
  if (typeof gc === 'number' && gc > 0 && gc < 1) options.garbageCollectionThreshold = gc;
  const roundup = roundupText(settings.roundup_power2_divisions);
  if (roundup !== undefined) options.roundupPower2Divisions = roundup;
  return options;
}

/** The twin as a labelled spec, with the recorded settings: `caching (PyTorch's allocator)`. */
export function pytorchTwin(settings?: Readonly<Record<string, unknown>>): LabelledStrategySpec {
  const options = pytorchTwinOptions(settings);
  const base = hasAllocator(twinName) ? strategyLabel(strategyInfo(twinName)) : twinName;
  const given = Object.entries(options).map(([k, v]) => `${k}=${String(v)}`);
  return { label: given.length === 0 ? base : `${base} with ${given.join(', ')}`, name: twinName, options };
}
