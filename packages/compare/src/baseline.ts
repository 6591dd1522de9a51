/**
 * Baseline runs: the same workload run by another framework (PyTorch eager, torch.compile, ...), read
 * from the JSON lines the scripts in bench/baselines print, so a comparison shows them beside the
 * allocators: a row in the table and their per-step losses on the loss chart.
 *
 * One JSON object per line: per epoch `{ "peer", "epoch", "epoch_ms", "loss", "accuracy",
 * "losses"?, "peak_allocated"?, "peak_reserved"? }`, and optionally a closing
 * `{ "peer", "summary": true, "gpu"?, "torch"? }`. Other lines (a framework's warnings) are not
 * allowed: a baseline file is data, and a stray line means the wrong file. The key naming the run
 * stays `"peer"`, the line format the scripts have always printed (recorded files carry it).
 * @module
 */
import { readFileSync } from 'node:fs';
import { spreadOf, warmupEpochsOf, type Spread } from './spread.js';

/** A baseline's run, as the comparison shows it. */
export interface BaselineRun {
  /** The baseline's name, e.g. 'torch-eager'. */
  name: string;
  /** The file it was read from. */
  file: string;
  epochs: { epoch: number; epochMs: number; loss: number; accuracy: number; losses: number[] }[];
  /** Median epoch time over the measured epochs (the first left out as warm-up when there are more). */
  medianEpochMs: number | null;
  epochSpread: Spread | null;
  /** Highest over the epochs, where the baseline reported them. */
  peakAllocatedBytes: number | null;
  peakReservedBytes: number | null;
  finalLoss: number | null;
  accuracy: number | null;
  /** What the summary line says of the run (GPU, framework version). */
  about: Record<string, string>;
}

/** A baseline file that is not what the scripts in bench/baselines write. */
export class BaselineFormatError extends Error {
  override readonly name = 'BaselineFormatError';
  readonly code = 'GPUMEM_BASELINE_FORMAT';
  constructor(
    readonly file: string,
    readonly line: number,
    problem: string,
  ) {
    super(`${file}:${line}: ${problem}`);
  }
}

function finite(record: Record<string, unknown>, key: string, file: string, line: number): number {
  const value = record[key];
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new BaselineFormatError(file, line, `expected a finite number for '${key}' but received ${JSON.stringify(value) ?? 'nothing'}`);
  }
  return value;
}

function optionalBytes(record: Record<string, unknown>, key: string, file: string, line: number): number | null {
  if (record[key] === undefined) return null;
  const value = finite(record, key, file, line);
  if (value < 0) throw new BaselineFormatError(file, line, `expected a non-negative byte count for '${key}' but received ${value}`);
  return value;
}

/** Parses a baseline's JSON lines (`file` names it in errors). */
export function parseBaseline(text: string, file = '<input>'): BaselineRun {
  const epochs: BaselineRun['epochs'] = [];
  const about: Record<string, string> = {};
  let name: string | undefined;
  let peakAllocated: number | null = null;
  let peakReserved: number | null = null;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = i + 1;
    const raw = lines[i]!.trim();
    if (raw === '') continue;
    let record: unknown;
    try {
      record = JSON.parse(raw);
    } catch {
      throw new BaselineFormatError(file, line, `expected a JSON object per line but received ${JSON.stringify(raw.slice(0, 60))}`);
    }
    if (record === null || typeof record !== 'object' || Array.isArray(record))
      throw new BaselineFormatError(file, line, 'expected a JSON object');
    const r = record as Record<string, unknown>;
    if (typeof r.peer !== 'string' || r.peer === '') throw new BaselineFormatError(file, line, `expected a string 'peer' naming the run`);
    if (name !== undefined && r.peer !== name)
      throw new BaselineFormatError(file, line, `expected one baseline per file ('${name}') but received '${r.peer}'`);
    name = r.peer;
    if (r.summary === true) {
      for (const key of ['gpu', 'torch', 'variant', 'mode']) if (typeof r[key] === 'string') about[key] = r[key] as string;
      continue;
    }
    const epoch = finite(r, 'epoch', file, line);
    const losses = r.losses === undefined ? [] : r.losses;
    if (!Array.isArray(losses) || !losses.every((v) => typeof v === 'number' && Number.isFinite(v))) {
      throw new BaselineFormatError(file, line, `expected an array of finite numbers for 'losses'`);
    }
    const epochMs = finite(r, 'epoch_ms', file, line);
    if (epochMs <= 0) throw new BaselineFormatError(file, line, `expected a positive 'epoch_ms' but received ${epochMs}`);
    epochs.push({
      epoch,
      epochMs,
      loss: finite(r, 'loss', file, line),
      accuracy: finite(r, 'accuracy', file, line),
      losses: losses as number[],
    });
    const pa = optionalBytes(r, 'peak_allocated', file, line);
    const pr = optionalBytes(r, 'peak_reserved', file, line);
    if (pa !== null) peakAllocated = Math.max(peakAllocated ?? 0, pa);
    if (pr !== null) peakReserved = Math.max(peakReserved ?? 0, pr);
  }
  if (name === undefined || epochs.length === 0)
    throw new BaselineFormatError(file, lines.length, 'no epoch records: expected the JSON lines a script in bench/baselines prints');
  const spread = spreadOf(epochs.slice(warmupEpochsOf(epochs.length)).map((e) => e.epochMs));
  const last = epochs.at(-1)!;
  return {
    name,
    file,
    epochs,
    medianEpochMs: spread?.median ?? null,
    epochSpread: spread,
    peakAllocatedBytes: peakAllocated,
    peakReservedBytes: peakReserved,
    finalLoss: last.loss,
    accuracy: last.accuracy,
    about,
  };
}

/** Reads a baseline file (see {@link parseBaseline}); a missing file is a BaselineFormatError naming it. */
export function readBaseline(path: string): BaselineRun {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new BaselineFormatError(path, 0, `cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  return parseBaseline(text, path);
}

/**
 * A baseline's throughput in the comparison's unit: its median epoch over the samples per epoch of the
 * workload, taken from any run that finished (the baseline trains the same workload); null when none did.
 */
export function baselineThroughput(
  baseline: BaselineRun,
  // structural, so this module needs nothing of types.ts (which imports BaselineRun from here)
  result: { runs: readonly { status: string; throughput: number | null; medianEpochMs: number | null }[] },
): number | null {
  const ok = result.runs.find((r) => r.status === 'ok' && r.throughput !== null && r.medianEpochMs);
  if (!ok || baseline.medianEpochMs === null) return null;
  const samplesPerEpoch = (ok.throughput! * ok.medianEpochMs!) / 1000;
  return samplesPerEpoch / (baseline.medianEpochMs / 1000);
}
