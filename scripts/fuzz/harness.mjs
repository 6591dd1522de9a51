// Runs the trace fuzzer's cases in child processes (scripts/fuzz/worker.mjs) under a heap limit, a
// time limit and a bound on resident memory, and classifies each outcome: 'ok' (a sound trace),
// 'typed' (one of the reader's typed errors), or 'defect' (an untyped error, an unsound trace, a
// crash, a timeout, or memory past the bound). A child that ends or is killed is replaced.
import { fork } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MiB = 2 ** 20;
const workerPath = fileURLToPath(new URL('./worker.mjs', import.meta.url));

/** The limits a case runs under, by default. */
export const defaultLimits = {
  /** The longest a case may take: this, and `timeoutPerMiBMs` a MiB of its content (time linear in the input). */
  timeoutMs: 10_000,
  timeoutPerMiBMs: 2000,
  /** The child's V8 heap (--max-old-space-size). */
  heapMb: 1024,
  /** Resident memory a case may add to the child's at start, besides its share of the content. */
  rssSlackBytes: 128 * MiB,
  /** Resident memory a case may use per byte of its (decompressed) content: one copy, and a quarter more. */
  rssPerContentByte: 1.25,
  /** Resident memory per value a pickle may hold (the unpickler's cap): a reference, in an array grown by doubling. */
  rssPerValue: 16,
  /** The most resident memory a worker may hold at any time, whatever the case's allowance. */
  maxRssBytes: 1024 * MiB,
};

/**
 * The resident memory a case may add to the child's own (its peak less its resident set at the
 * start): for `contentBytes` of content, decompressed, that may hold `values` values at once.
 */
export function rssAllowance(contentBytes, values, limits = defaultLimits) {
  return Math.round(limits.rssSlackBytes + limits.rssPerContentByte * contentBytes + limits.rssPerValue * values);
}

/** The longest a case of `contentBytes` of content may take. */
function caseTimeout(contentBytes, limits = defaultLimits) {
  return Math.round(limits.timeoutMs + (limits.timeoutPerMiBMs * contentBytes) / MiB);
}

/**
 * The outcome of a case from what happened to it: the child's reply, or `{ timeout: true }`,
 * `{ rssBytes, boundBytes }` (killed with its resident set past a bound), `{ exit: { code, signal,
 * stderr } }` (it ended). A reply's `peakRssBytes` less its `startRssBytes` may be at most
 * `allowanceBytes`, and its peak at most `maxRssBytes`. Returns `{ outcome: 'ok' | 'typed' | 'defect', detail }`.
 */
export function classify(result, allowanceBytes, maxRssBytes = defaultLimits.maxRssBytes) {
  if (result.timeout) return { outcome: 'defect', detail: `timeout: still reading after ${result.timeoutMs} ms` };
  if (result.exit) {
    const { code, signal, stderr } = result.exit;
    // V8's own report ('FATAL ERROR: ... heap out of memory') or an uncaught error's first line, before native frames
    const lines = String(stderr ?? '')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '');
    const last =
      lines.find((l) => l.startsWith('FATAL ERROR')) ?? lines.find((l) => /^\w*(Error|Exception)\b/.test(l)) ?? lines.slice(-2).join(' | ');
    return {
      outcome: 'defect',
      detail: `crash: the process ended (${signal ? `signal ${signal}` : `exit code ${code}`})${last ? `: ${last}` : ''}`,
    };
  }
  const mib = (bytes) => `${(bytes / MiB).toFixed(0)} MiB`;
  if (result.rssBytes !== undefined && result.outcome === undefined) {
    return { outcome: 'defect', detail: `memory: resident set ${mib(result.rssBytes)} past ${mib(result.boundBytes)}, killed` };
  }
  if (result.peakRssBytes > maxRssBytes) {
    return {
      outcome: 'defect',
      detail: `memory: the resident set peaked at ${mib(result.peakRssBytes)}, past the ${mib(maxRssBytes)} a worker may hold`,
    };
  }
  const grew = result.peakRssBytes - result.startRssBytes;
  if (grew > allowanceBytes) {
    const what = `${result.outcome}${result.name ? ` ${result.name}` : ''}`;
    return {
      outcome: 'defect',
      detail: `memory: the resident set grew by ${mib(grew)}, past the ${mib(allowanceBytes)} allowed (${what})`,
    };
  }
  switch (result.outcome) {
    case 'ok':
      return { outcome: 'ok', detail: `${result.events} events` };
    case 'typed':
      return { outcome: 'typed', detail: `${result.name}: ${result.detail}` };
    case 'unsound':
      return { outcome: 'defect', detail: `unsound trace: ${result.detail}` };
    case 'untyped':
      return { outcome: 'defect', detail: `untyped error: ${result.name}: ${result.detail}` };
    default:
      return { outcome: 'defect', detail: `unknown reply ${JSON.stringify(result).slice(0, 200)}` };
  }
}

/** Resident memory of process `pid` now (VmRSS), or undefined. */
function rssOf(pid) {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/** One child process reading cases one at a time. */
class FuzzChild {
  constructor(readerPath, limits) {
    this.limits = limits;
    this.stderr = '';
    this.pending = undefined;
    this.child = fork(workerPath, [readerPath], {
      execArgv: [`--max-old-space-size=${limits.heapMb}`, '--expose-gc'],
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d.toString()).slice(-4000);
    });
    this.ready = new Promise((resolve, reject) => {
      this.child.once('message', (m) =>
        m.ready ? resolve(m.rssBytes) : reject(new Error(`fuzz worker: unexpected ${JSON.stringify(m)}`)),
      );
      this.child.once('exit', (code, signal) =>
        reject(new Error(`fuzz worker ended before it was ready (${signal ?? code}): ${this.stderr.trim().slice(-1000)}`)),
      );
    });
    this.child.on('message', (m) => {
      if (!m.ready && this.pending?.id === m.id) this.pending.settle(m);
    });
    this.child.on('error', () => undefined); // a send to a child that has ended: its exit says what happened
    this.child.on('exit', (code, signal) => {
      this.exited = true;
      this.exitStatus = { code, signal, stderr: this.stderr };
      this.pending?.settle({ exit: this.exitStatus });
    });
  }

  /** Reads `path` in the child; resolves with what happened (a reply, a timeout, a resident set past `boundBytes`, an exit). */
  run(id, path, options, boundBytes, timeoutMs) {
    return new Promise((resolve) => {
      let poll;
      let timer;
      const settle = (result) => {
        if (this.pending?.id !== id) return;
        this.pending = undefined;
        clearInterval(poll);
        clearTimeout(timer);
        resolve(result);
      };
      this.pending = { id, settle };
      timer = setTimeout(() => {
        this.kill();
        settle({ timeout: true, timeoutMs });
      }, timeoutMs);
      poll = setInterval(() => {
        const rss = rssOf(this.child.pid);
        if (rss !== undefined && rss > boundBytes) {
          this.kill();
          settle({ rssBytes: rss, boundBytes });
        }
      }, 20);
      this.child.send({ id, path, options });
    });
  }

  kill() {
    this.killed = true;
    if (!this.exited) this.child.kill('SIGKILL');
  }
}

/**
 * Runs cases until `nextCase()` gives none, in `jobs` children of `readerPath` (a module exporting
 * `read(path, options)` and `typedErrors`), each case's file written under `dir`. Calls `onResult`
 * with each case and its `{ outcome, detail, ms, grewBytes, allowanceBytes }`; the order of results
 * may differ from the order of cases where `jobs` > 1.
 */
export async function runCases(nextCase, { readerPath, dir, jobs = 1, limits = defaultLimits, onResult }) {
  const lane = async (lane) => {
    let child;
    let baseRss = 0;
    let last;
    try {
      for (let c = nextCase(); c !== undefined; c = nextCase()) {
        if (child?.exited && !child.killed && last !== undefined) {
          // it ended between cases: after it answered for the last one (an error thrown later, a late abort)
          const { detail } = classify({ exit: child.exitStatus }, 0);
          onResult(last, { outcome: 'defect', detail: `after it was read: ${detail}`, ms: 0 });
        }
        if (child === undefined || child.exited) {
          child = new FuzzChild(readerPath, limits);
          baseRss = await child.ready;
        }
        const path = join(dir, `case-${lane}.bin`);
        writeFileSync(path, c.bytes);
        const allowanceBytes = rssAllowance(c.contentBytes, c.values ?? 0, limits);
        // killed at once past what no case reaches: its start, twice a full heap (V8's spaces besides
        // the old one, and a heap out of memory is V8's to report), and its allowance; or past the
        // most a worker may hold
        const boundBytes = Math.min(limits.maxRssBytes, baseRss + 2 * limits.heapMb * MiB + allowanceBytes);
        const started = performance.now();
        const timeoutMs = caseTimeout(c.contentBytes, limits);
        const result = await child.run(c.index ?? 0, path, c.options ?? {}, boundBytes, timeoutMs);
        const ms = result.ms ?? performance.now() - started;
        const { outcome, detail } = classify(result, allowanceBytes, limits.maxRssBytes);
        const grewBytes = result.peakRssBytes === undefined ? undefined : result.peakRssBytes - result.startRssBytes;
        if (outcome === 'defect') {
          child.kill(); // a fresh child for the next case
          child = undefined;
        }
        onResult(c, { outcome, detail, ms, grewBytes, allowanceBytes });
        rmSync(path, { force: true });
        last = c;
      }
    } finally {
      child?.kill();
    }
  };
  await Promise.all(Array.from({ length: jobs }, (_, i) => lane(i)));
}
