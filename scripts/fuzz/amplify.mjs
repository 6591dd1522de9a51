// The trace fuzzer's amplification cases: small files whose decoded work is many times their size.
// A pickle that pushes one memoized entry dict millions of times (DUP, or BINGET after BINPUT or
// MEMOIZE) into a snapshot's history; event lines repeated millions of times as repeated gzip
// members or zstd frames (many frames, skippable frames between them); content compressed twice
// (nested compression). Each is built without holding what it decodes to, and says how much content
// it decompresses to and how many values it may hold, which its memory allowance is measured against.
import { gzipSync } from 'node:zlib';
import * as zlib from 'node:zlib';
import { int, pick } from './draw.mjs';

const MiB = 2 ** 20;
const T0 = 1_732_000_000_000_000;

/** zlib's zstd compressor where this Node has one (22.15 and later). */
const zstdCompressSync = Reflect.get(zlib, 'zstdCompressSync');

/** Opcodes of the pickles written here (pickletools' names). */
const op = {
  PROTO: 0x80,
  STOP: 0x2e,
  MARK: 0x28,
  DUP: 0x32,
  BININT1: 0x4b,
  LONG1: 0x8a,
  SHORT_BINUNICODE: 0x8c,
  EMPTY_LIST: 0x5d,
  EMPTY_DICT: 0x7d,
  APPEND: 0x61,
  APPENDS: 0x65,
  SETITEM: 0x73,
  SETITEMS: 0x75,
  BINPUT: 0x71,
  BINGET: 0x68,
  MEMOIZE: 0x94,
};

const str = (s) => Buffer.from([op.SHORT_BINUNICODE, Buffer.byteLength(s), ...Buffer.from(s)]);
const long8 = (n) => {
  const b = Buffer.alloc(10);
  b[0] = op.LONG1;
  b[1] = 8;
  b.writeBigInt64LE(BigInt(n), 2);
  return b;
};

/** The opcodes of one history entry dict (an allocation), leaving it on the stack. */
function entryDict() {
  return Buffer.concat([
    Buffer.from([op.EMPTY_DICT, op.MARK]),
    str('action'),
    str('alloc'),
    str('addr'),
    long8(139_800_000_000_000),
    str('size'),
    Buffer.from([op.BININT1, 64]),
    str('stream'),
    Buffer.from([op.BININT1, 0]),
    str('time_us'),
    long8(T0),
    str('frames'),
    Buffer.from([op.EMPTY_LIST, op.SETITEMS]),
  ]);
}

/**
 * A snapshot `{'segments': [], 'device_traces': [[entry] * (count + 1)]}` whose history is one entry
 * dict referenced `count` more times: by DUP (all on the stack, one APPENDS), or by BINGET of the
 * memoized dict (in batches of `batch`, as Python writes APPENDS). A few bytes per reference.
 */
export function referenceBomb(count, how, batch = 1000) {
  const head = Buffer.concat([
    Buffer.from([op.PROTO, 4, op.EMPTY_DICT]),
    str('segments'),
    Buffer.from([op.EMPTY_LIST, op.SETITEM]),
    str('device_traces'),
    Buffer.from([op.EMPTY_LIST, op.EMPTY_LIST, op.MARK]),
    entryDict(),
  ]);
  const tail = Buffer.from([op.APPEND, op.SETITEM, op.STOP]);
  if (how === 'dup') {
    return Buffer.concat([head, Buffer.alloc(count, op.DUP), Buffer.from([op.APPENDS]), tail]);
  }
  // BINPUT 0 (or MEMOIZE), the first APPENDS, then batches of BINGET 0
  const put = how === 'memoize' ? Buffer.from([op.MEMOIZE]) : Buffer.from([op.BINPUT, 0]);
  const parts = [head, put, Buffer.from([op.APPENDS])];
  const full = Buffer.concat([Buffer.from([op.MARK]), Buffer.alloc(2 * batch, Buffer.from([op.BINGET, 0])), Buffer.from([op.APPENDS])]);
  for (let left = count; left > 0; left -= batch) {
    const n = Math.min(batch, left);
    parts.push(
      n === batch
        ? full
        : Buffer.concat([Buffer.from([op.MARK]), Buffer.alloc(2 * n, Buffer.from([op.BINGET, 0])), Buffer.from([op.APPENDS])]),
    );
  }
  parts.push(tail);
  return Buffer.concat(parts);
}

/** A zstd skippable frame of `n` bytes of payload (magic 0x184D2A50..5F, a 32-bit size). */
export function skippableFrame(n, variant = 0) {
  const b = Buffer.alloc(8 + n, 0x5a);
  b.writeUInt32LE(0x184d2a50 + (variant & 15), 0);
  b.writeUInt32LE(n, 4);
  return b;
}

/** `content` compressed with `compression` ('gzip' or 'zstd'; gzip where this Node has no zstd). */
function compress(content, compression) {
  return compression === 'zstd' && zstdCompressSync ? zstdCompressSync(content) : gzipSync(content, { level: 1 });
}

/** The event lines of a line format, for repeating. */
function eventRow(format) {
  return format === 'jsonl'
    ? '{"timeNs":1,"action":"alloc","ptr":4096,"bytes":64,"stream":0,"tag":0}\n'
    : '140437529597760,14:03:21.100012,free,0x7f3a2c000000,4000000,0x0\n';
}

/**
 * A line trace whose one MiB of event lines is repeated `count` times, each repeat its own gzip member
 * or zstd frame (compressed once, so the file is `count` copies of one small frame), a skippable
 * frame between some of them.
 */
function repeatedFrames(format, rnd, head, count) {
  const row = eventRow(format);
  const piece = Buffer.from(row.repeat(Math.floor(MiB / row.length)));
  const compression = zstdCompressSync && rnd() < 0.6 ? 'zstd' : 'gzip';
  const frame = compress(piece, compression);
  const parts = [compress(head, compression)];
  const skippable = compression === 'zstd' && rnd() < 0.5;
  for (let i = 0; i < count; i++) {
    parts.push(frame);
    if (skippable && i % 7 === 0) parts.push(skippableFrame(int(rnd, 64), i));
  }
  return { bytes: Buffer.concat(parts), contentBytes: head.length + count * piece.length, compression };
}

/**
 * An amplification case for `format` and its seed content `data`: { mutation, bytes, contentBytes,
 * values }, `bytes` being the file as written (compressed where the case is).
 */
export function amplify(format, data, rnd) {
  const kind = int(rnd, 4);
  if (format === 'torch-snapshot' && kind < 2) {
    // a history of one entry referenced millions of times: the 1 KB zstd pickle of 30M DUPs
    const count = pick(rnd, [100_000, 1_000_000, 10_000_000, 30_000_000]);
    const how = pick(rnd, ['dup', 'dup', 'binget', 'memoize']);
    const content = referenceBomb(count, how);
    const bytes = compress(content, pick(rnd, ['zstd', 'gzip']));
    return { mutation: `${how}-bomb`, bytes, contentBytes: content.length, values: content.length };
  }
  if (kind === 2) {
    // nested compression: the reader sees compressed bytes inside (not a trace), never a second pass
    const inner = compress(data, pick(rnd, ['zstd', 'gzip']));
    const bytes = compress(inner, pick(rnd, ['zstd', 'gzip']));
    return { mutation: 'nested-compression', bytes, contentBytes: inner.length, values: format === 'torch-snapshot' ? inner.length : 0 };
  }
  if (format === 'torch-snapshot') {
    // the seed split into many frames or members, with skippable frames and trailing bytes
    const { bytes, contentBytes } = framed(data, rnd);
    return { mutation: 'many-frames', bytes, contentBytes, values: contentBytes };
  }
  if (kind === 3) {
    const { bytes, contentBytes } = framed(data, rnd);
    return { mutation: 'many-frames', bytes, contentBytes, values: 0 };
  }
  // millions of events for a few hundred KB of file
  const newline = data.indexOf(0x0a);
  const head = newline < 0 ? data : data.subarray(0, newline + 1);
  const count = pick(rnd, [4, 16, 128]);
  const { bytes, contentBytes, compression } = repeatedFrames(format, rnd, head, count);
  return { mutation: `repeated-${compression}-frames`, bytes, contentBytes, values: 0 };
}

/** `data` cut into pieces, each compressed on its own (zstd frames or gzip members), maybe with trailing bytes. */
function framed(data, rnd) {
  const compression = zstdCompressSync && rnd() < 0.7 ? 'zstd' : 'gzip';
  const pieces = 1 + int(rnd, 40);
  const size = Math.max(1, Math.ceil(data.length / pieces));
  const parts = [];
  if (compression === 'zstd' && rnd() < 0.3) parts.push(skippableFrame(int(rnd, 32))); // as pzstd starts its files
  for (let at = 0; at < data.length || parts.length === 0; at += size) {
    parts.push(compress(data.subarray(at, at + size), compression));
    if (compression === 'zstd' && rnd() < 0.2) parts.push(skippableFrame(int(rnd, 32), at));
  }
  if (rnd() < 0.2) parts.push(pick(rnd, [Buffer.from('garbage'), Buffer.alloc(int(rnd, 16) + 1), Buffer.from([0x28, 0xb5, 0x2f])]));
  return { bytes: Buffer.concat(parts), contentBytes: data.length };
}
