// A child of the trace fuzzer: reads one case at a time with the reader module it is given (its
// `read(path, options)` and `typedErrors`), checks what it returns, and answers with the outcome,
// the time taken, and its resident memory at the start of the case and at its peak over it. The parent bounds its heap
// (--max-old-space-size), its time and its memory; anything that ends it is the parent's to report.
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const reader = await import(pathToFileURL(process.argv[2]).href);

/** Resets the peak resident set (VmHWM) to the current one; false where the kernel does not allow it. */
function resetPeak() {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

/** The resident set (VmRSS) and its peak (VmHWM) in bytes, or undefined where /proc does not say. */
function rss() {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const kb = (name) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1]) * 1024;
    const now = kb('VmRSS');
    const peak = kb('VmHWM');
    return Number.isFinite(now) && Number.isFinite(peak) ? { now, peak } : undefined;
  } catch {
    return undefined;
  }
}

const actions = new Set(['alloc', 'free', 'oom']);
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;
/** Events checked for soundness, at most: every one of a small trace, the first ones of a big trace. */
const maxCheckedEvents = 200_000;

/** Why a trace read from any input is not one every reader promises (fields checked), or undefined. */
function unsound(trace) {
  if (trace === null || typeof trace !== 'object') return `returned ${trace === null ? 'null' : typeof trace}`;
  if (trace.header === null || typeof trace.header !== 'object' || typeof trace.header.source !== 'string')
    return 'header without a source';
  const events = trace.events;
  if (events === null || typeof events !== 'object' || !isCount(events.length)) return 'events is not an array';
  for (let i = 0; i < Math.min(events.length, maxCheckedEvents); i++) {
    const e = events[i];
    if (!actions.has(e.action)) return `event ${i}: action ${JSON.stringify(e.action)}`;
    for (const key of ['timeNs', 'ptr', 'bytes', 'stream', 'tag']) {
      if (!isCount(e[key])) return `event ${i}: ${key} ${e[key]} is not a non-negative safe integer`;
    }
    if (e.tag > 0xffffffff) return `event ${i}: tag ${e.tag} past 32 bits`;
    for (const key of ['reservedBytes', 'thread']) {
      if (e[key] !== undefined && !isCount(e[key])) return `event ${i}: ${key} ${e[key]} is not a non-negative safe integer`;
    }
  }
  return undefined;
}

process.on('message', async ({ id, path, options }) => {
  globalThis.gc?.(); // what earlier cases left on the heap is not this one's
  const start = resetPeak() ? rss() : undefined;
  const started = performance.now();
  let reply;
  try {
    const trace = await reader.read(path, options);
    const problem = unsound(trace);
    reply = problem === undefined ? { outcome: 'ok', events: trace.events.length } : { outcome: 'unsound', detail: problem };
  } catch (e) {
    const typed = reader.typedErrors.some((T) => e instanceof T);
    const name = e?.constructor?.name ?? typeof e;
    reply = { outcome: typed ? 'typed' : 'untyped', name, detail: String(e?.message ?? e).slice(0, 500) };
    if (!typed) reply.stack = String(e?.stack ?? '').slice(0, 2000);
  }
  const ms = performance.now() - started;
  // what the reader left behind (a stream's late error, a timer) ends the process now, for this case
  await new Promise((resolve) => setTimeout(resolve, 5));
  const end = start === undefined ? undefined : rss();
  process.send({ id, ...reply, ms, startRssBytes: start?.now, peakRssBytes: end?.peak });
});

process.send({ ready: true, rssBytes: process.memoryUsage.rss() });
