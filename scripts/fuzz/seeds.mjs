// The trace fuzzer's seed inputs, per reader: the trace package's fixtures, and small traces made
// here (a JSONL and an RMM CSV written by the package's own writer, RMM logs in both of its time
// forms, PyTorch snapshots pickled in protocol 2 and 4). Each seed is its content uncompressed;
// `gzip` says whether the case is written compressed.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serializeTrace } from '@gpumem/trace';
import { seededRandom } from '@gpumem/allocator-core/tools';
import { pickle } from './pickle.mjs';

/** The readers, by the format of what they read. */
export const fuzzFormats = ['jsonl', 'rmm-csv', 'torch-snapshot'];

const MiB = 2 ** 20;
const T0 = 1_732_000_000_000_000; // time_us of a PyTorch snapshot: µs since the Unix epoch

/** A small trace of a training-like run: two streams, four tags, reserved bytes and threads. */
function generatedTrace() {
  const rnd = seededRandom(0x7ace);
  const events = [];
  const live = [];
  let t = 0;
  let reserved = 0;
  for (let i = 0; i < 240; i++) {
    t += 1 + Math.floor(rnd() * 5000);
    if (live.length > 0 && rnd() < 0.45) {
      const [ptr, bytes, stream] = live.splice(Math.floor(rnd() * live.length), 1)[0];
      events.push({ timeNs: t, action: 'free', ptr, bytes, stream, tag: i % 4, thread: 4242 });
      continue;
    }
    const bytes = 512 * (1 + Math.floor(rnd() * 4096));
    const stream = rnd() < 0.2 ? 7 : 0;
    if (rnd() < 0.02) {
      events.push({ timeNs: t, action: 'oom', ptr: 0, bytes: 64 * 2 ** 30, stream, tag: i % 4, reservedBytes: reserved, thread: 4242 });
      continue;
    }
    const ptr = 0x7f0000000000 + i * 0x100000;
    reserved = Math.max(reserved, (live.length + 1) * 2 * MiB);
    live.push([ptr, bytes, stream]);
    events.push({ timeNs: t, action: 'alloc', ptr, bytes, stream, tag: i % 4, reservedBytes: reserved, thread: 4242 });
  }
  const header = {
    source: 'gpumem record',
    allocator: 'pool',
    device: 'cuda:0',
    createdAt: '2026-01-02T03:04:05.000Z',
    workload: { model: 'gcn', dataset: 'synthetic', nodes: 1000, layers: [64, 64] },
    tags: ['setup', 'forward', 'backward', 'optimizer'],
    droppedEvents: 0,
  };
  return { header, events };
}

/**
 * `trace` as libgpumem_torch records Python frames: tags that repeat a name ('other' for frames not
 * named), and events tagged past the last name; with a byte order mark and CRLF line ends.
 */
function framesTrace(trace) {
  const tags = ['other', 'train.py:42:forward', 'other', 'train.py:57:backward', 'other'];
  const events = trace.events.slice(0, 60).map((e, i) => ({ ...e, tag: i % 7 }));
  return { header: { source: 'gpumem-torch', tags }, events };
}

/** RMM logs as its two time forms write them, one of them running past midnight. */
function rmmLogs() {
  const head = 'Thread,Time,Action,Pointer,Size,Stream';
  const rows = (time) =>
    Array.from({ length: 40 }, (_, i) => {
      const action = i === 17 ? 'allocate failure' : i % 3 === 2 ? 'free' : 'allocate';
      const ptr = i === 17 ? '0x0' : `0x7f3a2c${(i * 4096).toString(16).padStart(6, '0')}`;
      return `140437529597760,${time(i)},${action},${ptr},${4096 * (i + 1)},${i % 5 === 0 ? '0x5612a8e3c9f0' : '0x0'}`;
    });
  const seconds = [head, ...rows((i) => `1732000000.${String(i * 137).padStart(6, '0')}`)].join('\n');
  const midnight = [
    head,
    ...rows((i) => (i < 20 ? `23:59:59.${String(i * 1000).padStart(6, '0')}` : `00:00:00.${String(i).padStart(6, '0')}`)),
  ];
  return { seconds: `${seconds}\n`, midnight: `${midnight.join('\r\n')}\r\n` };
}

/** Frames as PyTorch symbolizes them: lists shared between entries of the same traceback. */
function frames(file) {
  return [
    { filename: file, line: 42, name: 'forward' },
    { filename: '/usr/lib/python3.12/site-packages/torch/nn/modules/module.py', line: 1527, name: '_call_impl' },
  ];
}

/** The frames list of every entry: the one list given. */
const sharedBy = (list) => () => list;

/**
 * A PyTorch snapshot's dict: a history on two devices (segments, allocations, frees, an OOM) and the
 * segments at its end. `framesOf()` gives each entry's frames list (one list shared by all by default).
 */
export function snapshotValue({ entries = 60, framesOf = sharedBy(frames('train.py')) } = {}) {
  const A = 139_800_000_000_000;
  const history = [{ action: 'segment_alloc', addr: A, size: 64 * MiB, stream: 0, time_us: T0, frames: framesOf() }];
  for (let i = 0; i < entries; i++) {
    const addr = A + i * 512 * 1024;
    const t = T0 + 10 * i + 1;
    if (i % 3 === 2) {
      const freed = A + (i - 1) * 512 * 1024;
      history.push({ action: 'free_requested', addr: freed, size: 4096, stream: 0, time_us: t, frames: framesOf() });
      history.push({ action: 'free_completed', addr: freed, size: 4096, stream: 0, time_us: t, frames: framesOf() });
    } else history.push({ action: 'alloc', addr, size: 4096, stream: 0, time_us: t, frames: framesOf() });
  }
  history.push({
    action: 'oom',
    device_free: 1_234_567,
    size: 40_000_000_000,
    stream: 0,
    time_us: T0 + 10 * entries + 5,
    frames: framesOf(),
  });
  const E = 139_900_000_000_000;
  const device1 = [
    { action: 'segment_map', addr: E, size: 20 * MiB, stream: 99, time_us: T0 + 3, frames: [] },
    { action: 'alloc', addr: E, size: 6 * MiB, stream: 99, time_us: T0 + 4, frames: [] },
    { action: 'free_requested', addr: E, size: 6 * MiB, stream: 99, time_us: T0 + 8, frames: [] },
    { action: 'free_completed', addr: E, size: 6 * MiB, stream: 99, time_us: T0 + 8, frames: [] },
  ];
  const block = (address, size, state) => ({ address, size, requested_size: state === 'inactive' ? 0 : size, state, frames: [] });
  const segments = [
    {
      device: 0,
      address: A,
      total_size: 64 * MiB,
      allocated_size: 4096,
      active_size: 4096,
      requested_size: 4096,
      stream: 0,
      segment_type: 'large',
      segment_pool_id: [0, 0],
      is_expandable: false,
      frames: [],
      blocks: [block(A, 4096, 'active_allocated'), block(A + 4096, 64 * MiB - 4096, 'inactive')],
    },
  ];
  return {
    segments,
    device_traces: [history, device1],
    allocator_settings: { PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True', max_split_size: -1, roundup_power2_divisions: [1, 2] },
  };
}

/** A seed: its name, the reader it is for, its content (uncompressed) and whether it is written gzipped. */
function seed(name, format, content, gzip = false) {
  return { name, format, content: Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8'), gzip };
}

/** The format a fixture file is in, by its name. */
function fixtureFormat(name) {
  if (name.endsWith('.csv')) return 'rmm-csv';
  if (/\.jsonl?(\.gz)?$/.test(name)) return 'jsonl';
  if (/\.pickle(\.gz)?$/.test(name)) return 'torch-snapshot';
  return undefined;
}

/** The trace package's fixtures (in `root`), gzipped ones uncompressed with `gunzip`. */
function fixtureSeeds(root, gunzip) {
  const seeds = [];
  for (const dir of ['packages/trace/src/fixtures', 'packages/trace/src/snapshot/fixtures']) {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const format = fixtureFormat(name);
      if (format === undefined) continue;
      const data = readFileSync(join(root, dir, name));
      const gz = name.endsWith('.gz');
      seeds.push(seed(`${dir.split('/').at(-1)}/${name}`, format, gz ? gunzip(data) : data, gz));
    }
  }
  return seeds;
}

/** Every seed, fixtures first, each reader's generated ones after. */
export function fuzzSeeds(root, gunzip) {
  const trace = generatedTrace();
  const rmm = rmmLogs();
  const snapshot = snapshotValue();
  return [
    ...fixtureSeeds(root, gunzip),
    seed('generated.jsonl', 'jsonl', serializeTrace(trace, 'jsonl')),
    seed('generated.jsonl.gz', 'jsonl', serializeTrace(trace, 'jsonl'), true),
    seed('frames.jsonl', 'jsonl', `\uFEFF${serializeTrace(framesTrace(trace), 'jsonl').replaceAll('\n', '\r\n')}`),
    seed('generated.csv', 'rmm-csv', serializeTrace(trace, 'rmm-csv')),
    seed('seconds.csv', 'rmm-csv', rmm.seconds),
    seed('midnight.csv.gz', 'rmm-csv', rmm.midnight, true),
    seed('generated-p2.pickle', 'torch-snapshot', pickle(snapshot, 2)),
    seed('generated-p4.pickle', 'torch-snapshot', pickle(snapshot, 4)),
    seed('generated-p4.pickle.gz', 'torch-snapshot', pickle(snapshot, 4), true),
  ];
}
