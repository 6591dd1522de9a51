import { describe, expect, expectTypeOf, it } from 'vitest';
import { createAllocator } from './index.js';
import { defineOptions, option, type OptionsOf } from './options.js';

const example = defineOptions('example', {
  upstream: option.oneOf(['cuda', 'host'], { default: 'host' }),
  chunkBytes: option.bytes({ default: 1024 }),
  threshold: option.nonNegative(),
  verbose: option.boolean(),
  path: option.custom((value, name) => {
    if (typeof value !== 'string') throw new TypeError(`Expected a string for ${name} but received ${typeof value}`);
    return value;
  }),
});

describe('defineOptions', () => {
  it('fills in defaults and leaves options without one undefined', () => {
    expect(example.parse({})).toEqual({ upstream: 'host', chunkBytes: 1024, threshold: undefined, verbose: undefined, path: undefined });
    expect(example.parse({ upstream: 'cuda', threshold: 0, verbose: true, path: 'x' })).toEqual({
      upstream: 'cuda',
      chunkBytes: 1024,
      threshold: 0,
      verbose: true,
      path: 'x',
    });
  });

  it('derives the options type and the parsed type from the same entries', () => {
    type Options = OptionsOf<typeof example>;
    expectTypeOf<Options['upstream']>().toEqualTypeOf<'cuda' | 'host' | undefined>();
    expectTypeOf<Options['path']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<{ chunkBytes: number }>().toExtend<Options>();
    expectTypeOf<{ chunkBytes: string }>().not.toExtend<Options>();
    const parsed = example.parse({});
    expectTypeOf(parsed.upstream).toEqualTypeOf<'cuda' | 'host'>();
    expectTypeOf(parsed.chunkBytes).toEqualTypeOf<number>();
    expectTypeOf(parsed.threshold).toEqualTypeOf<number | undefined>();
  });

  it('rejects an unknown key, listing the known ones in definition order', () => {
    expect(() => example.parse({ chunkbytes: 1 })).toThrow(
      new TypeError(
        "Unknown option 'chunkbytes' for the 'example' allocator; expected one of: upstream, chunkBytes, threshold, verbose, path",
      ),
    );
  });

  it('rejects a bad value with the typed error of its kind, naming the option', () => {
    expect(() => example.parse({ upstream: 'gpu' })).toThrow(
      new TypeError("Expected one of 'cuda', 'host' for upstream but received 'gpu' of type string"),
    );
    expect(() => example.parse({ chunkBytes: 0 })).toThrow(
      new RangeError('Expected positive integer for chunkBytes but received 0 of type number'),
    );
    expect(() => example.parse({ chunkBytes: '1' })).toThrow(TypeError);
    expect(() => example.parse({ threshold: -1 })).toThrow(RangeError);
    expect(() => example.parse({ verbose: 1 })).toThrow(new TypeError('Expected boolean for verbose but received 1 of type number'));
    expect(() => example.parse({ path: 3 })).toThrow(new TypeError('Expected a string for path but received number'));
  });

  it('checks a required option even when it is missing', () => {
    const required = defineOptions('needs', {
      library: option.custom(
        (value, name) => {
          if (typeof value !== 'string') throw new TypeError(`Expected a path for ${name}`);
          return value;
        },
        { required: true },
      ),
    });
    expect(() => required.parse({})).toThrow(new TypeError('Expected a path for library'));
    expect(required.parse({ library: 'a' })).toEqual({ library: 'a' });
  });

  it('is what the built-in strategies check their options with', () => {
    expect(() => createAllocator('host', { limitBytes: 1, tracking: 4 } as never)).toThrow(
      new TypeError(
        "Unknown option 'tracking' for the 'host' allocator; expected one of: limitBytes, trackingCapacity, faultInjection, addressOnly",
      ),
    );
    expect(() => createAllocator('host', { faultInjection: {} })).toThrow(
      new TypeError('Expected failEvery and/or failAfterBytes in faultInjection but received neither'),
    );
  });
});
