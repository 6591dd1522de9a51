// A small pickle writer for the trace fuzzer's generated inputs: dicts, lists, strings, integers,
// floats, booleans and None, in protocol 2 or 4, as Python's pickle module writes them. An object
// met twice is written once and then fetched from the memo (BINPUT/BINGET, MEMOIZE in protocol 4),
// as PyTorch's shared frame lists are, which is what makes a memoization bomb small on disk.

const op = {
  PROTO: 0x80,
  FRAME: 0x95,
  STOP: 0x2e,
  MARK: 0x28,
  NONE: 0x4e,
  NEWTRUE: 0x88,
  NEWFALSE: 0x89,
  BININT: 0x4a,
  BININT1: 0x4b,
  BININT2: 0x4d,
  LONG1: 0x8a,
  BINFLOAT: 0x47,
  BINUNICODE: 0x58,
  SHORT_BINUNICODE: 0x8c,
  EMPTY_LIST: 0x5d,
  APPENDS: 0x65,
  EMPTY_DICT: 0x7d,
  SETITEMS: 0x75,
  BINPUT: 0x71,
  LONG_BINPUT: 0x72,
  BINGET: 0x68,
  LONG_BINGET: 0x6a,
  MEMOIZE: 0x94,
};

/** Python's batch size for APPENDS and SETITEMS. */
const batch = 1000;

/** Little-endian two's complement bytes of `n` (a safe integer), as LONG1 holds them. */
function longBytes(n) {
  const out = [];
  let v = BigInt(n);
  do {
    out.push(Number(v & 0xffn));
    v >>= 8n;
  } while (!((v === 0n && (out.at(-1) & 0x80) === 0) || (v === -1n && (out.at(-1) & 0x80) !== 0)));
  return out;
}

/**
 * The pickle of `value` (protocol 2 or 4). Plain objects are dicts, arrays are lists; an object or
 * array reached again is a memo reference.
 */
export function pickle(value, protocol = 4) {
  const chunks = [];
  const memo = new Map();
  const bytes = (...b) => chunks.push(Buffer.from(b));
  const u32 = (n) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    chunks.push(b);
  };
  const put = (v) => {
    const index = memo.size;
    memo.set(v, index);
    if (protocol >= 4) bytes(op.MEMOIZE);
    else if (index < 256) bytes(op.BINPUT, index);
    else {
      bytes(op.LONG_BINPUT);
      u32(index);
    }
  };
  /** Writes a scalar, a memo reference, or a container's opening (its items go on the work list). */
  const write = (v) => {
    if (v === null || v === undefined) return bytes(op.NONE);
    if (v === true) return bytes(op.NEWTRUE);
    if (v === false) return bytes(op.NEWFALSE);
    if (typeof v === 'number' && Number.isInteger(v)) {
      if (v >= 0 && v < 256) return bytes(op.BININT1, v);
      if (v >= 0 && v < 65536) return bytes(op.BININT2, v & 0xff, v >> 8);
      if (v >= -(2 ** 31) && v < 2 ** 31) {
        bytes(op.BININT);
        const b = Buffer.alloc(4);
        b.writeInt32LE(v);
        return chunks.push(b);
      }
      const long = longBytes(v);
      return bytes(op.LONG1, long.length, ...long);
    }
    if (typeof v === 'number') {
      const b = Buffer.alloc(9);
      b[0] = op.BINFLOAT;
      b.writeDoubleBE(v, 1);
      return chunks.push(b);
    }
    if (typeof v === 'string') {
      const text = Buffer.from(v, 'utf8');
      if (protocol >= 4 && text.length < 256) bytes(op.SHORT_BINUNICODE, text.length);
      else {
        bytes(op.BINUNICODE);
        u32(text.length);
      }
      chunks.push(text);
      return;
    }
    const seen = memo.get(v);
    if (seen !== undefined) {
      if (seen < 256) return bytes(op.BINGET, seen);
      bytes(op.LONG_BINGET);
      return u32(seen);
    }
    if (typeof v !== 'object') throw new TypeError(`pickle: cannot write a ${typeof v}`);
    // a container: its items are written after it, in batches, through the work list (no recursion)
    const list = Array.isArray(v);
    bytes(list ? op.EMPTY_LIST : op.EMPTY_DICT);
    put(v);
    const items = list ? v : Object.entries(v).flat();
    const per = list ? batch : 2 * batch;
    const tasks = [];
    for (let i = 0; i < items.length; i += per) tasks.push(mark, ...items.slice(i, i + per), list ? appends : setItems);
    for (let i = tasks.length - 1; i >= 0; i--) work.push(tasks[i]);
  };
  const mark = Symbol('MARK');
  const appends = Symbol('APPENDS');
  const setItems = Symbol('SETITEMS');
  const work = [value];
  while (work.length > 0) {
    const next = work.pop();
    if (next === mark) bytes(op.MARK);
    else if (next === appends) bytes(op.APPENDS);
    else if (next === setItems) bytes(op.SETITEMS);
    else write(next);
  }
  bytes(op.STOP);
  const body = Buffer.concat(chunks);
  if (protocol < 4) return Buffer.concat([Buffer.from([op.PROTO, protocol]), body]);
  // protocol 4 frames its opcodes; one frame around the whole body, as short pickles have
  const frame = Buffer.alloc(9);
  frame[0] = op.FRAME;
  frame.writeBigUInt64LE(BigInt(body.length), 1);
  return Buffer.concat([Buffer.from([op.PROTO, protocol]), frame, body]);
}
