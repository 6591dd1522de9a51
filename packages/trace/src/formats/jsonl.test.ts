import { describe, expect, it } from 'vitest';
import { parseTrace } from '../format.js';
import { compileTrace, peakByTag } from '../replay.js';

const alloc = (ptr: number, bytes: number, tag: number) =>
  `{"timeNs":${ptr},"action":"alloc","ptr":${ptr},"bytes":${bytes},"stream":0,"tag":${tag}}`;
const free = (ptr: number, bytes: number) => `{"timeNs":${ptr + 1000},"action":"free","ptr":${ptr},"bytes":${bytes},"stream":0,"tag":0}`;

describe('JSONL tags', () => {
  // What libgpumem_torch writes with frames: the header names the frames that allocated the
  // most, every other tag "other", and "other" last; a tag past the list is "other" too.
  const framesTrace = [
    '{"format":"gpumem-trace","version":1,"source":"libgpumem_torch","tags":["other","a.py:3:f","other","b.py:9:g","other"]       ,"eventCount":5}',
    alloc(4096, 100, 1),
    alloc(8192, 10, 2),
    alloc(12288, 300, 3),
    alloc(16384, 7, 9),
    free(4096, 100),
  ].join('\n');

  it('tags that share a name are one tag, and a tag past the list is its last name', () => {
    const t = parseTrace(framesTrace);
    expect(t.header.tags).toEqual(['other', 'a.py:3:f', 'b.py:9:g']);
    expect(t.events.map((e) => e.tag)).toEqual([1, 0, 2, 0, 0]);
  });

  it('replay stacks the peak by the merged names', () => {
    const peak = peakByTag(compileTrace(parseTrace(framesTrace)));
    expect(peak).toEqual([
      { tag: 'b.py:9:g', bytes: 300 },
      { tag: 'a.py:3:f', bytes: 100 },
      { tag: 'other', bytes: 17 },
    ]);
  });

  it('distinct names are read as written, tags past the list kept as they are', () => {
    const t = parseTrace(
      ['{"format":"gpumem-trace","version":1,"source":"x","tags":["setup","forward"]}', alloc(4096, 1, 1), alloc(8192, 1, 5)].join('\n'),
    );
    expect(t.header.tags).toEqual(['setup', 'forward']);
    expect(t.events.map((e) => e.tag)).toEqual([1, 5]);
  });

  // linear, not quadratic: 100,000 names merged pairwise would be 10^10 comparisons, past any test timeout
  it('merges many tags (100,000 names, 1,000 of them repeated)', () => {
    const tags = Array.from({ length: 100_000 }, (_, i) => `f${i % 99_000}`);
    const header = JSON.stringify({ format: 'gpumem-trace', version: 1, source: 'x', tags });
    const t = parseTrace([header, alloc(4096, 1, 98_999), alloc(8192, 1, 99_000), alloc(12288, 1, 99_999)].join('\n'));
    expect(t.header.tags).toHaveLength(99_000);
    expect(t.header.tags![98_999]).toBe('f98999');
    expect(t.events.map((e) => e.tag)).toEqual([98_999, 0, 999]);
  });

  it('a trace cut short keeps ["other"]: every tag reads as "other"', () => {
    const t = parseTrace(['{"format":"gpumem-trace","version":1,"source":"x","tags":["other"]            }', alloc(4096, 1, 3)].join('\n'));
    expect(t.header.tags).toEqual(['other']);
    expect(peakByTag(compileTrace(t))).toEqual([{ tag: 'other', bytes: 1 }]);
  });
});
