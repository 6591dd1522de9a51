/**
 * A small, safe reader for the part of Python's pickle format that plain data takes: protocols 2
 * to 5 as `pickle.dump` writes dicts, lists, tuples, ints, floats, strings, bytes, bools and None.
 *
 * It is a stack machine over a Buffer that never constructs a Python object: every opcode that
 * would (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT*, PERSID, out-of-band
 * buffers) is refused with {@link PickleFormatError}. Every read is bounds-checked; a declared length
 * must fit in what is left of the buffer; open MARKs are limited. Each opcode advances the reader,
 * every value pushed costs at least one byte of input and memo references share rather than copy,
 * so time and memory stay linear in the size of the input; the values held at once (stack, lists,
 * tuples, dicts, memo) are capped as well ({@link defaultMaxPickleItems}), so a large file of
 * cheap opcodes is refused with an error rather than growing an array past what V8 allows.
 * What the references multiply to downstream (one entry dict DUPed 30 million times is 30 million
 * events) is bounded by the readers' budget (`../formats/budget.ts`): the values decoded, every
 * reference counted, and the items of any one container, each past its limit a TraceBudgetError.
 * @module
 */
import { defaultMaxTraceEvents, pickleValuesPerEvent, raiseBudgetHint, TraceBudgetError } from '../formats/budget.js';
import { TraceFormatError } from '../formats/model.js';

/** A value read from a pickle. Tuples are frozen arrays, lists plain arrays, dicts Maps. */
export type PickleValue = null | boolean | number | bigint | string | Uint8Array | PickleValue[] | readonly PickleValue[] | PickleDict;

/** A Python dict: keys as read (Python's equality between 1, 1.0 and True is not modelled). */
export type PickleDict = Map<PickleValue, PickleValue>;

/** Limits on what {@link unpickle} accepts. */
export interface UnpickleOptions {
  /** The most MARKs open at once (containers being built inside each other). Default 1000. */
  maxOpenMarks?: number;
  /** The longest integer (LONG1/LONG4), in bytes. Default 1024. */
  maxIntBytes?: number;
  /**
   * The most values held at once: on the stack, in every list, tuple and dict (a dict entry counts
   * two) and in the memo. Default {@link defaultMaxPickleItems}.
   */
  maxItems?: number;
  /**
   * The readers' budget on decoded work: the most events the snapshot may hold (default
   * {@link defaultMaxTraceEvents}). It caps the items of one list, tuple or dict (and of the stack
   * between two MARKs) at that, and the values decoded in all, memo references and DUPs each counted,
   * at 16 times that; past either is a {@link TraceBudgetError}.
   */
  maxEvents?: number;
}

/**
 * The most values a pickle may hold at once by default: 2^26 (about 512 MiB of references). Every
 * value costs at least one byte of input, so the count never exceeds the input's size, and a file
 * below 64 MiB never reaches the cap; PyTorch's snapshots hold one value per 3 to 4 bytes, so the cap
 * admits snapshots of some 200 MiB. It keeps a large file of cheap opcodes (NONE, or NONE APPEND
 * pairs) from growing one array past V8's limit (2^27 elements), which aborts the process instead of
 * throwing.
 */
export const defaultMaxPickleItems = 2 ** 26;

/** V8's limit on the entries of one Map (a dict, or the memo): setting one more throws a RangeError. */
const maxMapEntries = 2 ** 24;

/** A malformed or refused pickle: names the file, the byte offset of the opcode, and the opcode. */
export class PickleFormatError extends TraceFormatError {
  constructor(
    file: string,
    /** The byte offset of the opcode at fault (0-based; after decompression for gzip files). */
    readonly offset: number,
    /** The opcode's name ('BINUNICODE', 'GLOBAL', ...), or '' before the first opcode. */
    readonly opcode: string,
    reason: string,
  ) {
    // A pickle has no lines: `line` stays 0 and the message names the byte offset instead.
    super(file, 0, reason);
    this.message = `${file}: byte ${offset}${opcode ? ` (${opcode})` : ''}: ${reason}`;
  }
}

/** Every opcode of pickle protocols 0 to 5, for messages (pickletools' names). */
const opcodeNames: Record<number, string> = {
  0x28: 'MARK',
  0x2e: 'STOP',
  0x30: 'POP',
  0x31: 'POP_MARK',
  0x32: 'DUP',
  0x46: 'FLOAT',
  0x49: 'INT',
  0x4a: 'BININT',
  0x4b: 'BININT1',
  0x4c: 'LONG',
  0x4d: 'BININT2',
  0x4e: 'NONE',
  0x50: 'PERSID',
  0x51: 'BINPERSID',
  0x52: 'REDUCE',
  0x53: 'STRING',
  0x54: 'BINSTRING',
  0x55: 'SHORT_BINSTRING',
  0x56: 'UNICODE',
  0x58: 'BINUNICODE',
  0x61: 'APPEND',
  0x62: 'BUILD',
  0x63: 'GLOBAL',
  0x64: 'DICT',
  0x7d: 'EMPTY_DICT',
  0x65: 'APPENDS',
  0x67: 'GET',
  0x68: 'BINGET',
  0x69: 'INST',
  0x6a: 'LONG_BINGET',
  0x6c: 'LIST',
  0x5d: 'EMPTY_LIST',
  0x6f: 'OBJ',
  0x70: 'PUT',
  0x71: 'BINPUT',
  0x72: 'LONG_BINPUT',
  0x73: 'SETITEM',
  0x74: 'TUPLE',
  0x29: 'EMPTY_TUPLE',
  0x75: 'SETITEMS',
  0x47: 'BINFLOAT',
  0x80: 'PROTO',
  0x81: 'NEWOBJ',
  0x82: 'EXT1',
  0x83: 'EXT2',
  0x84: 'EXT4',
  0x85: 'TUPLE1',
  0x86: 'TUPLE2',
  0x87: 'TUPLE3',
  0x88: 'NEWTRUE',
  0x89: 'NEWFALSE',
  0x8a: 'LONG1',
  0x8b: 'LONG4',
  0x42: 'BINBYTES',
  0x43: 'SHORT_BINBYTES',
  0x8c: 'SHORT_BINUNICODE',
  0x8d: 'BINUNICODE8',
  0x8e: 'BINBYTES8',
  0x8f: 'EMPTY_SET',
  0x90: 'ADDITEMS',
  0x91: 'FROZENSET',
  0x92: 'NEWOBJ_EX',
  0x93: 'STACK_GLOBAL',
  0x94: 'MEMOIZE',
  0x95: 'FRAME',
  0x96: 'BYTEARRAY8',
  0x97: 'NEXT_BUFFER',
  0x98: 'READONLY_BUFFER',
};

/** Opcodes that import or call Python code, or load objects from outside the pickle. */
const objectOpcodes = new Set([0x63, 0x93, 0x52, 0x62, 0x69, 0x6f, 0x81, 0x92, 0x82, 0x83, 0x84, 0x50, 0x51, 0x97, 0x98]);
/** Opcodes of the text protocols (0 and 1), which `pickle.dump` does not write at protocol 2 or more. */
const textOpcodes = new Set([0x46, 0x49, 0x4c, 0x53, 0x54, 0x55, 0x56, 0x67, 0x70]);
/** Set opcodes: valid Python, but a memory snapshot holds no sets. */
const setOpcodes = new Set([0x8f, 0x90, 0x91]);

/** True when `data` starts like a pickle of protocol 2 to 5 (PROTO and its version). */
export function isPickle(data: Uint8Array): boolean {
  return data.length >= 2 && data[0] === 0x80 && data[1]! >= 2 && data[1]! <= 5;
}

/** A short description of a value's type, for messages (never its whole content). */
export function pickleTypeName(value: PickleValue | undefined): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'None';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'bigint') return 'int';
  if (typeof value === 'string') return 'str';
  if (value instanceof Uint8Array) return 'bytes';
  if (value instanceof Map) return 'dict';
  return Object.isFrozen(value) ? 'tuple' : 'list';
}

const isList = (v: PickleValue | undefined): v is PickleValue[] => Array.isArray(v) && !Object.isFrozen(v);

/**
 * Reads one pickled value from `data` (up to its STOP; later bytes are ignored, as Python does).
 * Integers come back as numbers when they are safe integers, as bigints otherwise.
 * Throws {@link PickleFormatError} for anything malformed, truncated, refused or over a limit.
 */
export function unpickle(data: Uint8Array, file = '<input>', options: UnpickleOptions = {}): PickleValue {
  const maxOpenMarks = options.maxOpenMarks ?? 1000;
  const maxIntBytes = options.maxIntBytes ?? 1024;
  const maxItems = options.maxItems ?? defaultMaxPickleItems;
  const maxEvents = options.maxEvents ?? defaultMaxTraceEvents;
  const maxContainerItems = maxEvents;
  const maxDecoded = maxEvents * pickleValuesPerEvent;
  let decoded = 0; // values pushed, every reference counted: the work the file asks for
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const end = buf.length;
  let pos = 0;
  let at = 0; // offset of the current opcode
  let op = '';
  let stack: PickleValue[] = [];
  const marks: PickleValue[][] = [];
  const memo = new Map<number, PickleValue>();
  let held = 0; // values on the stack, in containers and in the memo

  /** Past the budget on decoded work: a typed error naming the limit and the setting that raises it. */
  const overBudget = (what: string, limit: number): never => {
    throw new TraceBudgetError(
      file,
      0,
      `${file}: byte ${at}${op ? ` (${op})` : ''}`,
      `${what}, past the readers' budget on decoded work (a pickle that references one value many times decodes to far more than it holds); ${raiseBudgetHint(maxEvents)}`,
      limit,
    );
  };
  /** One more item in a container (a list, a dict, the stack between MARKs) of `length` items. */
  const grows = (length: number): void => {
    if (length >= maxContainerItems) overBudget(`a list, dict or tuple of more than ${maxContainerItems} items`, maxContainerItems);
  };

  /** Counts `n` more values held; fails past the cap. */
  const hold = (n: number): void => {
    held += n;
    if (held > maxItems) {
      fail(
        `the pickle holds more than ${maxItems} values at once, more than this reader accepts (PyTorch's snapshots hold one value per 3 to 4 bytes)`,
      );
    }
  };

  const fail: (reason: string) => never = (reason) => {
    throw new PickleFormatError(file, at, op, reason);
  };
  /** Claims `n` bytes at `pos`; returns their start. */
  const take = (n: number, what: string): number => {
    if (n > end - pos) fail(`${what} needs ${n} bytes but only ${end - pos} remain (truncated file?)`);
    const start = pos;
    pos += n;
    return start;
  };
  /** A declared length: must fit in what is left of the buffer. */
  const length = (declared: number | bigint, what: string): number => {
    if (BigInt(declared) > BigInt(end - pos))
      fail(`declares a ${what} of ${declared} bytes but only ${end - pos} remain (truncated file?)`);
    return Number(declared);
  };
  const pop = (): PickleValue => {
    if (stack.length === 0) fail('the stack is empty (an opcode is missing its operand, or a MARK is misplaced)');
    return stack.pop()!;
  };
  const top = (): PickleValue => {
    if (stack.length === 0) fail('the stack is empty');
    return stack[stack.length - 1]!;
  };
  const popMark = (): PickleValue[] => {
    const items = stack;
    const outer = marks.pop();
    if (outer === undefined) fail('no MARK is open');
    stack = outer!;
    return items;
  };
  const push = (v: PickleValue): void => {
    hold(1);
    if (++decoded > maxDecoded) overBudget(`more than ${maxDecoded} values decoded`, maxDecoded);
    grows(stack.length);
    stack.push(v);
  };
  const str = (n: number): string => {
    const start = take(n, 'the string');
    return buf.toString('utf8', start, start + n);
  };
  const bytes = (n: number): Uint8Array => {
    const start = take(n, 'the bytes');
    return new Uint8Array(buf.subarray(start, start + n)); // a copy: the result must not pin or alias the file's buffer
  };
  /** A little-endian two's-complement integer of `n` bytes (LONG1, LONG4). */
  const long = (n: number): number | bigint => {
    if (n > maxIntBytes) fail(`an integer of ${n} bytes is longer than the ${maxIntBytes} this reader accepts`);
    const start = take(n, 'the integer');
    if (n === 0) return 0;
    if (n <= 6) return buf.readIntLE(start, n);
    let v = 0n;
    for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(buf[start + i]!);
    if (buf[start + n - 1]! & 0x80) v -= 1n << BigInt(8 * n);
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  };
  const u64 = (what: string): bigint => buf.readBigUInt64LE(take(8, what));
  const memoPut = (key: number): void => {
    if (!memo.has(key)) {
      if (memo.size >= maxMapEntries) fail(`more than ${maxMapEntries} memo entries, more than this reader holds`);
      hold(1);
    }
    memo.set(key, top());
  };
  const memoGet = (key: number): PickleValue => {
    const v = memo.get(key);
    if (v === undefined) fail(`memo entry ${key} was never stored`);
    return v!;
  };
  const setItems = (dict: PickleValue, items: PickleValue[]): void => {
    if (!(dict instanceof Map)) fail(`expects a dict under the items, found ${pickleTypeName(dict)}`);
    if (items.length % 2 !== 0) fail(`expects key/value pairs, found ${items.length} items`);
    const d = dict as PickleDict;
    for (let i = 0; i < items.length; i += 2) {
      const key = items[i]!;
      if (key instanceof Map || isList(key)) fail(`a dict key must be hashable, found ${pickleTypeName(key)}`);
      if (d.size >= maxMapEntries && !d.has(key)) fail(`a dict of more than ${maxMapEntries} entries, more than this reader holds`);
      if (!d.has(key)) grows(d.size);
      d.set(key, items[i + 1]!);
    }
  };
  /** What a refused opcode asks for, where the pickle says (GLOBAL 'module name'). */
  const refused = (code: number): never => {
    let what = '';
    if (code === 0x63 || code === 0x69) {
      const nl1 = buf.indexOf(0x0a, pos);
      const nl2 = nl1 < 0 ? -1 : buf.indexOf(0x0a, nl1 + 1);
      if (nl2 > 0 && nl2 - pos < 256) what = ` ${buf.toString('latin1', pos, nl1)}.${buf.toString('latin1', nl1 + 1, nl2)}`;
    } else if (code === 0x93 && typeof stack[stack.length - 1] === 'string' && typeof stack[stack.length - 2] === 'string') {
      what = ` ${String(stack[stack.length - 2]).slice(0, 100)}.${String(stack[stack.length - 1]).slice(0, 100)}`;
    }
    return fail(
      `${what ? `the pickle asks to import${what}` : 'the pickle asks to construct or load a Python object'}; a memory snapshot ` +
        'holds only dicts, lists, numbers and strings, so the file is refused (nothing in it is run)',
    );
  };

  if (!isPickle(buf)) {
    op = '';
    fail(
      end >= 2 && buf[0] === 0x80
        ? `pickle protocol ${buf[1]} is not supported (protocols 2 to 5 are)`
        : 'not a pickle of protocol 2 to 5 (it must start with bytes 0x80 0x02..0x05)',
    );
  }

  while (pos < end) {
    at = pos;
    const code = buf[pos++]!;
    op = opcodeNames[code] ?? `0x${code.toString(16).padStart(2, '0')}`;
    switch (code) {
      case 0x80: {
        // PROTO
        const version = buf[take(1, 'the protocol')]!;
        if (version < 2 || version > 5) fail(`pickle protocol ${version} is not supported (protocols 2 to 5 are)`);
        break;
      }
      case 0x95: // FRAME: a length prefix for buffered reading; the opcodes inside follow as usual.
        length(u64('the frame length'), 'frame');
        break;
      case 0x2e: // STOP
        return pop();
      case 0x28: // MARK
        if (marks.length >= maxOpenMarks) fail(`more than ${maxOpenMarks} MARKs open at once (nesting too deep)`);
        marks.push(stack);
        stack = [];
        break;
      case 0x30: // POP
        pop();
        held--;
        break;
      case 0x31: // POP_MARK
        held -= popMark().length;
        break;
      case 0x32: // DUP
        push(top());
        break;
      case 0x4e: // NONE
        push(null);
        break;
      case 0x88: // NEWTRUE
        push(true);
        break;
      case 0x89: // NEWFALSE
        push(false);
        break;
      case 0x4a: // BININT
        push(buf.readInt32LE(take(4, 'the int')));
        break;
      case 0x4b: // BININT1
        push(buf[take(1, 'the int')]!);
        break;
      case 0x4d: // BININT2
        push(buf.readUInt16LE(take(2, 'the int')));
        break;
      case 0x8a: // LONG1
        push(long(buf[take(1, 'the length')]!));
        break;
      case 0x8b: {
        // LONG4 (a signed length; negative is an error in Python too)
        const n = buf.readInt32LE(take(4, 'the length'));
        if (n < 0) fail(`negative length ${n}`);
        push(long(length(n, 'integer')));
        break;
      }
      case 0x47: // BINFLOAT
        push(buf.readDoubleBE(take(8, 'the float')));
        break;
      case 0x8c: // SHORT_BINUNICODE
        push(str(buf[take(1, 'the length')]!));
        break;
      case 0x58: // BINUNICODE
        push(str(length(buf.readUInt32LE(take(4, 'the length')), 'string')));
        break;
      case 0x8d: // BINUNICODE8
        push(str(length(u64('the length'), 'string')));
        break;
      case 0x43: // SHORT_BINBYTES
        push(bytes(buf[take(1, 'the length')]!));
        break;
      case 0x42: // BINBYTES
        push(bytes(length(buf.readUInt32LE(take(4, 'the length')), 'bytes object')));
        break;
      case 0x8e: // BINBYTES8
      case 0x96: // BYTEARRAY8
        push(bytes(length(u64('the length'), 'bytes object')));
        break;
      case 0x5d: // EMPTY_LIST
        push([]);
        break;
      case 0x6c: // LIST
        push(popMark());
        break;
      case 0x61: {
        // APPEND
        const item = pop();
        const list = top();
        if (!isList(list)) fail(`expects a list under the item, found ${pickleTypeName(list)}`);
        grows((list as PickleValue[]).length);
        (list as PickleValue[]).push(item);
        break;
      }
      case 0x65: {
        // APPENDS (a loop, not push(...items): a batch can be larger than the call stack allows)
        const items = popMark();
        const list = top();
        if (!isList(list)) fail(`expects a list under the MARK, found ${pickleTypeName(list)}`);
        const l = list as PickleValue[];
        grows(l.length + items.length - 1);
        for (const item of items) l.push(item);
        break;
      }
      case 0x7d: // EMPTY_DICT
        push(new Map());
        break;
      case 0x64: {
        // DICT
        const items = popMark();
        const dict: PickleDict = new Map();
        setItems(dict, items);
        push(dict);
        break;
      }
      case 0x73: {
        // SETITEM
        const value = pop();
        const key = pop();
        setItems(top(), [key, value]);
        break;
      }
      case 0x75: {
        // SETITEMS
        const items = popMark();
        setItems(top(), items);
        break;
      }
      case 0x29: // EMPTY_TUPLE
        push(Object.freeze([]));
        break;
      case 0x74: // TUPLE
        push(Object.freeze(popMark()));
        break;
      case 0x85: // TUPLE1
        push(Object.freeze([pop()]));
        break;
      case 0x86: {
        // TUPLE2
        const b = pop();
        push(Object.freeze([pop(), b]));
        break;
      }
      case 0x87: {
        // TUPLE3
        const c = pop();
        const b = pop();
        push(Object.freeze([pop(), b, c]));
        break;
      }
      case 0x71: // BINPUT
        memoPut(buf[take(1, 'the memo index')]!);
        break;
      case 0x72: // LONG_BINPUT
        memoPut(buf.readUInt32LE(take(4, 'the memo index')));
        break;
      case 0x94: // MEMOIZE
        memoPut(memo.size);
        break;
      case 0x68: // BINGET
        push(memoGet(buf[take(1, 'the memo index')]!));
        break;
      case 0x6a: // LONG_BINGET
        push(memoGet(buf.readUInt32LE(take(4, 'the memo index'))));
        break;
      default:
        if (objectOpcodes.has(code)) refused(code);
        if (textOpcodes.has(code)) fail('a text opcode of pickle protocol 0 or 1, which this reader does not read');
        if (setOpcodes.has(code)) fail('a set, which a memory snapshot does not hold');
        fail('not a pickle opcode (corrupt file?)');
    }
  }
  at = end;
  op = '';
  return fail('the pickle ends without a STOP opcode (truncated file?)');
}

/** Limits of {@link pickleToJson}. */
export interface PickleToJsonOptions {
  /** Containers deeper than this become '…'. Default 4. */
  maxDepth?: number;
  /** Items read from one list or dict; the rest are left out. Default 100. */
  maxItemsPerContainer?: number;
  /** Values written in all: past it, containers become '…'. Default 2000. */
  maxValues?: number;
}

/** What {@link pickleToJson} writes for a container that holds itself, directly or deeper. */
export const pickleCycleMarker = '<cycle>';

/**
 * A pickle value as plain JSON-able data, bounded in depth, width and total size: memo references
 * can make a small pickle reference one container many times over (and a container can hold
 * itself), so the work and the result are capped by `maxValues`, never by what the references
 * multiply to. A container inside itself becomes {@link pickleCycleMarker}; bigints become strings,
 * bytes `<n bytes>`, dict keys strings.
 */
export function pickleToJson(value: PickleValue, options: PickleToJsonOptions = {}): unknown {
  const maxDepth = options.maxDepth ?? 4;
  const maxWidth = options.maxItemsPerContainer ?? 100;
  let budget = options.maxValues ?? 2000;
  const open = new Set<object>(); // the containers on the path from the root: a cycle returns to one
  const convert = (v: PickleValue, depth: number): unknown => {
    budget--;
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Uint8Array) return `<${v.length} bytes>`;
    if (v === null || typeof v !== 'object') return v;
    if (open.has(v)) return pickleCycleMarker;
    if (depth >= maxDepth || budget <= 0) return '…';
    open.add(v);
    try {
      if (v instanceof Map) {
        const out: Record<string, unknown> = {};
        let n = 0;
        for (const [k, item] of v) {
          if (++n > maxWidth || budget <= 0) break;
          const key = typeof k === 'string' || typeof k === 'number' || typeof k === 'boolean' ? String(k) : pickleTypeName(k);
          // defineProperty: a '__proto__' key stays an ordinary property
          Object.defineProperty(out, key, { value: convert(item, depth + 1), enumerable: true, writable: true, configurable: true });
        }
        return out;
      }
      const out: unknown[] = [];
      for (let i = 0; i < v.length && i < maxWidth && budget > 0; i++) out.push(convert(v[i]!, depth + 1));
      return out;
    } finally {
      open.delete(v);
    }
  };
  return convert(value, 0);
}
