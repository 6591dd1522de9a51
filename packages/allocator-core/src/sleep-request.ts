/**
 * The checks of sleep's and wake's arguments ({@link SleepRequest}, a list of tags), shared by every
 * strategy that sleeps: bad input is a TypeError or RangeError naming the argument, before any work.
 * @module
 */
import { checkTag } from './tags.js';
import type { SleepReport, SleepRequest } from './types.js';
import { describeValue } from './validate.js';

const requestKeys = ['tags', 'keep'];

/** A list of tag names (`name` is the argument's), or undefined. */
export function checkTagList(tags: unknown, name: string): readonly string[] | undefined {
  if (tags === undefined) return undefined;
  if (!Array.isArray(tags)) throw new TypeError(`Expected an array of tag names for ${name} but received ${describeValue(tags)}`);
  tags.forEach((tag, i) => {
    checkTag(tag, `${name}[${i}]`);
  });
  return tags as readonly string[];
}

/** The request as checked: `{ tags?, keep? }` with known keys only, or undefined. */
export function checkSleepRequest(request: unknown): SleepRequest | undefined {
  if (request === undefined) return undefined;
  if (request === null || typeof request !== 'object' || Array.isArray(request)) {
    throw new TypeError(`Expected an object { tags?, keep? } for request but received ${describeValue(request)}`);
  }
  for (const key of Object.keys(request)) {
    if (!requestKeys.includes(key)) throw new TypeError(`Unknown option '${key}' in request; expected one of: ${requestKeys.join(', ')}`);
  }
  const { tags, keep } = request as { tags?: unknown; keep?: unknown };
  const checked: SleepRequest = {};
  const list = checkTagList(tags, 'request.tags');
  if (list !== undefined) checked.tags = list;
  if (typeof keep === 'boolean') checked.keep = keep;
  else if (keep !== undefined) {
    if (!Array.isArray(keep)) {
      throw new TypeError(`Expected a boolean or an array of tag names for request.keep but received ${describeValue(keep)}`);
    }
    checked.keep = checkTagList(keep, 'request.keep') as readonly string[];
  }
  return checked;
}

/** What a sleep that names no tag (`{ tags: [] }`) reports: nothing changed. */
export function emptySleepReport(): SleepReport {
  return { changed: [], unchanged: [], deviceBytes: 0, copiedBytes: 0, seconds: 0 };
}
