/**
 * Allocation tags: what the allocations made inside `withTag(tag, fn)` are for ('weights',
 * 'kv-cache', ...), so that a strategy that sleeps can put them to sleep together
 * (`Allocator.sleep`). The tag follows `fn` across awaits (AsyncLocalStorage); outside any
 * withTag it is 'default'. Native strategies read it from the calling thread, where a native
 * allocator's malloc sends it when it has changed since the last one sent ({@link syncNativeTag}).
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { processShared } from './process-shared.js';
import { describeValue } from './validate.js';

/** The tag of allocations made outside any withTag. */
const defaultTag = 'default';
/** The longest tag name, in UTF-8 bytes (the native core's max_tag_length). */
const maxTagBytes = 128;

/**
 * One store for every copy of the core in this process (a plug-in's copy sees the application's
 * tags), and the tag last sent to this thread's native core (undefined: none, the process tag).
 */
const state = processShared('allocation-tags', 1, () => ({
  storage: new AsyncLocalStorage<string>(),
  sent: undefined as string | undefined,
}));

/** Throws TypeError for a non-string, RangeError for a name the native core refuses; `name` is the argument's. */
function checkTag(tag: unknown, name = 'tag'): asserts tag is string {
  if (typeof tag !== 'string') throw new TypeError(`Expected a tag name (string) for ${name} but received ${describeValue(tag)}`);
  if (tag.length === 0) throw new RangeError(`Expected a non-empty tag name for ${name} but received ''`);
  if (Buffer.byteLength(tag) > maxTagBytes) {
    throw new RangeError(`Expected a tag name of at most ${maxTagBytes} bytes for ${name} but received ${describeValue(tag)}`);
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the characters a tag name may not hold
  if (/[\u0000-\u001f\u007f]/.test(tag)) {
    throw new RangeError(`Expected a tag name without NUL or control characters for ${name} but received ${describeValue(tag)}`);
  }
}

/**
 * Runs `fn` with `tag` as the tag of every allocation it makes, directly or after an await: an
 * async `fn` keeps it until its promise settles. Nested calls restore the outer tag when they end.
 * Returns what `fn` returns (its promise, for an async one).
 *
 * ```ts
 * const weights = withTag('weights', () => allocator.malloc(bytes));
 * await withTag('kv', async () => { await ready; cache = allocator.malloc(n); });
 * allocator.sleep?.({ tags: ['kv'], keep: false });
 * ```
 */
export function withTag<T>(tag: string, fn: () => T): T {
  checkTag(tag);
  if (typeof fn !== 'function') throw new TypeError(`Expected a function for fn but received ${describeValue(fn)}`);
  return state.storage.run(tag, fn);
}

/** The tag allocations made here get: the innermost withTag's, else 'default'. */
export function currentTag(): string {
  return state.storage.getStore() ?? defaultTag;
}

/**
 * Sends the current tag to this thread's native core through `send` when it differs from the last
 * one sent (undefined: outside any withTag): one AsyncLocalStorage read per call otherwise.
 * @internal
 */
export function syncNativeTag(send: (tag: string | undefined) => void): void {
  const tag = state.storage.getStore();
  if (tag === state.sent) return;
  send(tag);
  state.sent = tag;
}
