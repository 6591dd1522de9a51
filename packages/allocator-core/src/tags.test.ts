import { describe, expect, it } from 'vitest';
import { currentTag, HostAllocator, registerAllocator, strategyInfo, TrackingAllocator, withTag } from './index.js';
import { syncNativeTag } from './tags.js';
import type { SleepReport, SleepRequest, TagStats } from './types.js';

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

describe('withTag and currentTag', () => {
  it("is 'default' outside any withTag, the innermost tag inside, and restores the outer one", () => {
    expect(currentTag()).toBe('default');
    const seen = withTag('outer', () => {
      const inner = withTag('inner', () => currentTag());
      return [currentTag(), inner, currentTag()];
    });
    expect(seen).toEqual(['outer', 'inner', 'outer']);
    expect(currentTag()).toBe('default');
  });

  it('keeps the tag of an async function across awaits, each of several interleaved ones its own', async () => {
    const seen: string[] = [];
    await Promise.all([
      withTag('left', async () => {
        await tick();
        seen.push(`left:${currentTag()}`);
        await tick();
        seen.push(`left:${currentTag()}`);
      }),
      withTag('right', async () => {
        seen.push(`right:${currentTag()}`);
        await tick();
        seen.push(`right:${currentTag()}`);
      }),
    ]);
    expect(seen.sort()).toEqual(['left:left', 'left:left', 'right:right', 'right:right']);
    expect(currentTag()).toBe('default');
  });

  it('returns what the function returns, and restores the tag when it throws', () => {
    expect(withTag('kv', () => 42)).toBe(42);
    expect(() =>
      withTag('kv', () => {
        throw new Error('inside');
      }),
    ).toThrow('inside');
    expect(currentTag()).toBe('default');
  });

  it('refuses a tag the native core would refuse, and a non-function', () => {
    expect(() => withTag(7 as never, () => 0)).toThrow(TypeError);
    expect(() => withTag('', () => 0)).toThrow(RangeError);
    expect(() => withTag('x'.repeat(129), () => 0)).toThrow(/at most 128 bytes/);
    expect(() => withTag('é'.repeat(65), () => 0)).toThrow(RangeError); // 130 bytes in UTF-8
    expect(() => withTag('a\nb', () => 0)).toThrow(/control characters/);
    expect(() => withTag('kv', 'no' as never)).toThrow(/function for fn/);
    expect(withTag('x'.repeat(128), () => currentTag())).toHaveLength(128);
  });
});

describe('the tag sent to the native core', () => {
  it('is sent only when it differs from the last one sent', () => {
    const sent: Array<string | undefined> = [];
    const send = (tag: string | undefined) => sent.push(tag);
    withTag('a', () => {
      syncNativeTag(send);
      syncNativeTag(send);
    });
    withTag('a', () => syncNativeTag(send));
    syncNativeTag(send);
    syncNativeTag(send);
    withTag('b', () => syncNativeTag(send));
    expect(sent).toEqual(['a', undefined, 'b']);
    syncNativeTag(send); // back to none, as it was
    expect(sent).toEqual(['a', undefined, 'b', undefined]);
  });
});

/** A TypeScript strategy that sleeps (it records what it is asked). */
class SleepyHost extends HostAllocator {
  readonly calls: string[] = [];
  override readonly sleep = (request?: SleepRequest): SleepReport => {
    this.calls.push(`sleep ${JSON.stringify(request)}`);
    return { changed: [...(request?.tags ?? [])], unchanged: [], deviceBytes: 0, copiedBytes: 0, seconds: 0 };
  };
  override readonly wake = (tags?: readonly string[]): SleepReport => {
    this.calls.push(`wake ${JSON.stringify(tags)}`);
    return { changed: [...(tags ?? [])], unchanged: [], deviceBytes: 0, copiedBytes: 0, seconds: 0 };
  };
  override readonly tagStats = (): TagStats[] => {
    this.calls.push('tagStats');
    return [];
  };
  override readonly trimBackup = (): void => {
    this.calls.push('trimBackup');
  };
}

describe('sleep in the registry and through adaptors', () => {
  it('carries the sleep flag (false unless a strategy says so)', () => {
    registerAllocator('sleepy-test', () => new SleepyHost(), { description: 'x', requiresCuda: false, sleep: true });
    expect(strategyInfo('sleepy-test').sleep).toBe(true);
    expect(strategyInfo('host').sleep).toBe(false);
    expect(() =>
      registerAllocator('bad-sleep', () => new HostAllocator(), { description: 'x', requiresCuda: false, sleep: 1 as never }),
    ).toThrow(/boolean for info.sleep/);
  });

  it('has no sleep methods on a native strategy whose leaf cannot sleep', () => {
    const a = new HostAllocator();
    expect([a.sleep, a.wake, a.tagStats, a.trimBackup]).toEqual([undefined, undefined, undefined, undefined]);
    a.dispose();
  });

  it('passes sleep, wake, tagStats and trimBackup through an adaptor where the upstream has them', () => {
    const upstream = new SleepyHost();
    const tracked = new TrackingAllocator(upstream, 8, { ownsUpstream: true });
    expect(tracked.sleep?.({ tags: ['kv'] }).changed).toEqual(['kv']);
    expect(tracked.wake?.(['kv']).changed).toEqual(['kv']);
    tracked.tagStats?.();
    tracked.trimBackup?.();
    expect(upstream.calls).toEqual(['sleep {"tags":["kv"]}', 'wake ["kv"]', 'tagStats', 'trimBackup']);
    tracked.dispose();
    expect(() => tracked.sleep?.()).toThrow(/disposed/);
    const plain = new TrackingAllocator(new HostAllocator(), 8, { ownsUpstream: true });
    expect(plain.sleep).toBeUndefined();
    plain.dispose();
  });
});
