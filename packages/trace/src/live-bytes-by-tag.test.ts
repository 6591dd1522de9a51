import { describe, expect, it } from 'vitest';
import { LiveBytesByTag } from './live-bytes-by-tag.js';

describe('LiveBytesByTag', () => {
  it('charges a free to the tag its allocation had, and a pointer it never saw to tag 0', () => {
    const split = new LiveBytesByTag(3, 5, 1000);
    split.alloc(0x100, 64, 1);
    split.record(0);
    split.alloc(0x200, 32, 2);
    split.record(1);
    split.free(0x100, 64);
    split.record(2);
    split.free(0x900, 200); // allocated before the first step: part of `before`
    split.record(3);
    split.alloc(0x100, 16, 2); // the address reused under another tag
    split.free(0x100, 16);
    split.record(4);
    expect(split.series).toEqual([
      [1000, 1000, 1000, 800, 800],
      [64, 64, 0, 0, 0],
      [0, 32, 32, 32, 32],
    ]);
  });

  it('without tags keeps nothing', () => {
    const split = new LiveBytesByTag(0, 2);
    split.alloc(0x100, 64, 0);
    split.record(0);
    expect(split.series).toEqual([]);
  });
});
