/** Types of harness.mjs, for the TypeScript that imports it (tests/). */

/** The limits a case runs under. */
export interface FuzzLimits {
  timeoutMs: number;
  timeoutPerMiBMs: number;
  heapMb: number;
  rssSlackBytes: number;
  rssPerContentByte: number;
  rssPerValue: number;
  /** The most resident memory a worker may hold at any time (1 GiB). */
  maxRssBytes: number;
}

export const defaultLimits: FuzzLimits;

/** One input for the reader: the file's bytes, its options, and what its content may amount to. */
export interface FuzzCase {
  index?: number;
  format: string;
  seed: string;
  mutation: string;
  bytes: Buffer;
  contentBytes: number;
  values?: number;
  options?: Record<string, unknown>;
}

export type FuzzOutcome = 'ok' | 'typed' | 'defect';

/** What happened to a case: a worker's reply, or a timeout, a kill past the memory bound, an exit. */
export type FuzzRunResult =
  | {
      outcome: 'ok' | 'typed' | 'untyped' | 'unsound';
      name?: string;
      detail?: string;
      events?: number;
      ms?: number;
      startRssBytes?: number;
      peakRssBytes?: number;
    }
  | { timeout: true; timeoutMs: number }
  | { rssBytes: number; boundBytes: number }
  | { exit: { code: number | null; signal: string | null; stderr?: string } };

export function rssAllowance(contentBytes: number, values: number, limits?: FuzzLimits): number;
export function classify(result: FuzzRunResult, allowanceBytes: number, maxRssBytes?: number): { outcome: FuzzOutcome; detail: string };

export interface FuzzResult {
  outcome: FuzzOutcome;
  detail: string;
  ms: number;
  grewBytes?: number;
  allowanceBytes?: number;
}

export function runCases(
  nextCase: () => FuzzCase | undefined,
  options: {
    readerPath: string;
    dir: string;
    jobs?: number;
    limits?: FuzzLimits;
    onResult: (c: FuzzCase, result: FuzzResult) => void;
  },
): Promise<void>;
