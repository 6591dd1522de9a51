/**
 * Peer runs: the same workload run by another framework (PyTorch eager, torch.compile, ...), read
 * from the JSON lines the scripts in bench/peers print, so a comparison shows them beside the
 * allocators: a row in the table and their per-step losses on the loss chart.
 *
 * One JSON object per line: per epoch `{ "peer", "epoch", "epoch_ms", "loss", "accuracy",
 * "losses"?, "peak_allocated"?, "peak_reserved"? }`, and optionally a closing
 * `{ "peer", "summary": true, "gpu"?, "torch"? }`. Other lines (a framework's warnings) are not
 * allowed: a peer file is data, and a stray line means the wrong file.
 * @module
 */
import { readFileSync } from 'node:fs';
import { spreadOf, warmupEpochsOf, type Spread } from './spread.js';

/** A peer's run, as the comparison shows it. */
export interface PeerRun {
  /** The peer's name, e.g. 'torch-eager'. */
  name: string;
  /** The file it was read from. */
  file: string;
  epochs: { epoch: number; epochMs: number; loss: number; accuracy: number; losses: number[] }[];
  /** Median epoch time over the measured epochs (the first left out as warm-up when there are more). */
  medianEpochMs: number | null;
  epochSpread: Spread | null;
  /** Highest over the epochs, where the peer reported them. */
  peakAllocatedBytes: number | null;
  peakReservedBytes: number | null;
  finalLoss: number | null;
  accuracy: number | null;
  /** What the summary line says of the run (GPU, framework version). */
  about: Record<string, string>;
}

/** A peer file that is not what the scripts in bench/peers write. */
export class PeerFormatError extends Error {
  override readonly name = 'PeerFormatError';
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
    throw new PeerFormatError(file, line, `expected a finite number for '${key}' but received ${JSON.stringify(value) ?? 'nothing'}`);
  }
  return value;
}

function optionalBytes(record: Record<string, unknown>, key: string, file: string, line: number): number | null {
  if (record[key] === undefined) return null;
  const value = finite(record, key, file, line);
  if (value < 0) throw new PeerFormatError(file, line, `expected a non-negative byte count for '${key}' but received ${value}`);
  return value;
}

/** Parses a peer's JSON lines (`file` names it in errors). */
export function parsePeer(text: string, file = '<input>'): PeerRun {
  const epochs: PeerRun['epochs'] = [];
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
      throw new PeerFormatError(file, line, `expected a JSON object per line but received ${JSON.stringify(raw.slice(0, 60))}`);
    }
    if (record === null || typeof record !== 'object' || Array.isArray(record)) throw new PeerFormatError(file, line, 'expected a JSON object');
    const r = record as Record<string, unknown>;
    if (typeof r.peer !== 'string' || r.peer === '') throw new PeerFormatError(file, line, `expected a string 'peer' naming the run`);
    if (name !== undefined && r.peer !== name) throw new PeerFormatError(file, line, `expected one peer per file ('${name}') but received '${r.peer}'`);
    name = r.peer;
    if (r.summary === true) {
      for (const key of ['gpu', 'torch', 'variant', 'mode']) if (typeof r[key] === 'string') about[key] = r[key] as string;
      continue;
    }
    const epoch = finite(r, 'epoch', file, line);
    const losses = r.losses === undefined ? [] : r.losses;
    if (!Array.isArray(losses) || !losses.every((v) => typeof v === 'number' && Number.isFinite(v))) {
      throw new PeerFormatError(file, line, `expected an array of finite numbers for 'losses'`);
    }
    const epochMs = finite(r, 'epoch_ms', file, line);
    if (epochMs <= 0) throw new PeerFormatError(file, line, `expected a positive 'epoch_ms' but received ${epochMs}`);
    epochs.push({ epoch, epochMs, loss: finite(r, 'loss', file, line), accuracy: finite(r, 'accuracy', file, line), losses: losses as number[] });
    const pa = optionalBytes(r, 'peak_allocated', file, line);
    const pr = optionalBytes(r, 'peak_reserved', file, line);
    if (pa !== null) peakAllocated = Math.max(peakAllocated ?? 0, pa);
    if (pr !== null) peakReserved = Math.max(peakReserved ?? 0, pr);
  }
  if (name === undefined || epochs.length === 0) throw new PeerFormatError(file, lines.length, 'no epoch records: expected the JSON lines a script in bench/peers prints');
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

/** Reads a peer file (see {@link parsePeer}); a missing file is a PeerFormatError naming it. */
export function readPeer(path: string): PeerRun {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new PeerFormatError(path, 0, `cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  return parsePeer(text, path);
}

/**
 * A peer's throughput in the comparison's unit: its median epoch over the samples per epoch of the
 * workload, taken from any run that finished (the peer trains the same workload); null when none did.
 */
export function peerThroughput(
  peer: PeerRun,
  // structural, so this module needs nothing of types.ts (which imports PeerRun from here)
  result: { runs: readonly { status: string; throughput: number | null; medianEpochMs: number | null }[] },
): number | null {
  const ok = result.runs.find((r) => r.status === 'ok' && r.throughput !== null && r.medianEpochMs);
  if (!ok || peer.medianEpochMs === null) return null;
  const samplesPerEpoch = (ok.throughput! * ok.medianEpochMs!) / 1000;
  return samplesPerEpoch / (peer.medianEpochMs / 1000);
}
