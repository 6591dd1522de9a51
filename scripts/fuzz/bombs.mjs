// The trace fuzzer's gzip bombs: content that decompresses to many times its size, built without
// holding that content, for each reader; and the size bombs every run starts with.
import * as zlib from 'node:zlib';
import { createGzip, gzipSync } from 'node:zlib';
import { referenceBomb } from './amplify.mjs';
import { int, pick } from './draw.mjs';
import { pickle } from './pickle.mjs';
import { snapshotValue } from './seeds.mjs';

const MiB = 2 ** 20;

/** gzip of `piece` repeated `count` times, as concatenated members (each member compressed once). */
const memberCache = new Map();
function repeatedMembers(piece, count) {
  const key = piece.toString('latin1');
  let member = memberCache.get(key);
  if (member === undefined) {
    member = gzipSync(piece, { level: 9 });
    if (memberCache.size < 64) memberCache.set(key, member);
  }
  return Array.from({ length: count }, () => member);
}

/** `filler` repeated to about 1 MiB. */
function mebibyteOf(filler) {
  return Buffer.concat(Array.from({ length: Math.max(1, Math.floor(MiB / filler.length)) }, () => filler));
}

/**
 * `head`, then `filler` repeated to about `bytes`, then `tail`, gzipped in 1 MiB members (gzip's
 * trailer then gives the size of the last member only): a bomb built without holding its content.
 */
function gzipBomb(head, filler, bytes, tail = Buffer.alloc(0)) {
  const piece = mebibyteOf(filler);
  const count = Math.max(1, Math.round(bytes / piece.length));
  const file = Buffer.concat([gzipSync(head), ...repeatedMembers(piece, count), gzipSync(tail)]);
  return { file, contentBytes: head.length + count * piece.length + tail.length };
}

/** The same content as {@link gzipBomb} as one gzip member, compressed a mebibyte at a time. */
async function gzipBombMember(head, filler, bytes) {
  const piece = mebibyteOf(filler);
  const count = Math.max(1, Math.round(bytes / piece.length));
  const gzip = createGzip({ level: 9 });
  const out = [];
  gzip.on('data', (d) => out.push(d));
  const done = new Promise((resolve, reject) => gzip.on('end', resolve).on('error', reject));
  gzip.write(head);
  for (let i = 0; i < count; i++) if (!gzip.write(piece)) await new Promise((resolve) => gzip.once('drain', resolve));
  gzip.end();
  await done;
  return { file: Buffer.concat(out), contentBytes: head.length + count * piece.length };
}

/**
 * A gzip bomb for `format` decompressing to about `bytes`: the size bombs of each reader. For a
 * pickle, `values` is the most values it holds at once.
 */
export function bombFor(format, rnd, bytes) {
  if (format === 'torch-snapshot') {
    switch (int(rnd, 3)) {
      case 0: // a pickle's STOP, then zeros (its reader takes the content whole)
        return { ...gzipBomb(Buffer.from([0x80, 4, 0x4e, 0x2e]), Buffer.alloc(4096), bytes), values: 1 };
      case 1: {
        // NONEs held at once, up to the unpickler's cap on values
        // (at most 4 MiB: each costs a reference in a growing array, which takes seconds a few million)
        const bomb = gzipBomb(Buffer.from([0x80, 4, 0x28]), Buffer.alloc(4096, 'N'), Math.min(bytes, 4 * MiB), Buffer.from('l.'));
        return { ...bomb, values: bomb.contentBytes };
      }
      default: {
        // a snapshot, then its own bytes over and over
        const bomb = gzipBomb(pickle(snapshotValue(), 4), pickle(snapshotValue(), 4), bytes);
        return { ...bomb, values: bomb.contentBytes };
      }
    }
  }
  const head = Buffer.from(
    format === 'jsonl'
      ? '{"format":"gpumem-trace","version":1,"source":"bomb"}\n'
      : 'Thread,Time,Action,Pointer,Size,Stream\n140437529597760,14:03:21.100012,allocate,0x7f3a2c000000,4000000,0x0\n',
  );
  const row =
    format === 'jsonl'
      ? '{"timeNs":1,"action":"alloc","ptr":4096,"bytes":64,"stream":0,"tag":0}\n'
      : '140437529597760,14:03:21.100012,free,0x7f3a2c000000,4000000,0x0\n';
  const filler = pick(rnd, [row, '\n', 'x', `${row.trimEnd()},`]);
  return { ...gzipBomb(head, Buffer.from(filler), bytes), values: 0 };
}

/**
 * The size bombs every run starts with: files that once broke a reader. A snapshot of 25,000 entries,
 * each with a frames list of its own holding one memoized frame with a 600 KB filename (it ran the
 * reader out of heap); a gzipped pickle of `N.` and `bombBytes` of zeros, one gzip member (its
 * content was held twice, which the memory allowance of 1.25 bytes a byte and 128 MiB catches from
 * some 200 MiB); JSONL headers holding an array 5,000 deep in each field (a stack overflow); a 1 KB
 * zstd pickle whose history is one entry dict and 30 million DUPs of it (it ran replay, doctor and
 * readTrace out of heap; gzip where this Node has no zstd).
 */
export async function sizeBombs({ bombBytes }) {
  const frame = { filename: `/${'a'.repeat(600_000)}.py`, line: 7, name: 'forward' };
  const d1 = pickle(snapshotValue({ entries: 25_000, framesOf: () => [frame] }), 4);
  const d5 = await gzipBombMember(Buffer.from([0x80, 4, 0x4e, 0x2e]), Buffer.alloc(4096), bombBytes);
  const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
  const d6 = ['workload', 'eventCount', 'tags', 'source', 'format'].map((field) =>
    Buffer.from(
      `${field === 'format' ? `{"format":${deep},"version":1}` : `{"format":"gpumem-trace","version":1,"${field}":${deep}}`}\n`,
      'utf8',
    ),
  );
  const d1gz = gzipSync(d1, { level: 9 });
  const dups = referenceBomb(30_000_000, 'dup');
  const zstd = Reflect.get(zlib, 'zstdCompressSync');
  return [
    {
      format: 'torch-snapshot',
      seed: 'size-bomb',
      mutation: 'dup-bomb-30m',
      bytes: zstd ? zstd(dups) : gzipSync(dups, { level: 9 }),
      contentBytes: dups.length,
      values: dups.length,
      options: {},
    },
    {
      format: 'torch-snapshot',
      seed: 'size-bomb',
      mutation: 'frames-memo-bomb',
      bytes: d1gz,
      contentBytes: d1.length,
      values: d1.length,
      options: {},
    },
    {
      format: 'torch-snapshot',
      seed: 'size-bomb',
      mutation: 'zeros-after-stop',
      bytes: d5.file,
      contentBytes: d5.contentBytes,
      values: 1,
      options: {},
    },
    ...d6.map((bytes, i) => ({
      format: 'jsonl',
      seed: 'size-bomb',
      mutation: `deep-${['workload', 'eventCount', 'tags', 'source', 'format'][i]}`,
      bytes,
      contentBytes: bytes.length,
      values: 0,
      options: {},
    })),
  ];
}
