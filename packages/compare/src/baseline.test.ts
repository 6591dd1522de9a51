import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseBaseline, BaselineFormatError, readBaseline } from './baseline.js';

const fixture = fileURLToPath(new URL('./fixtures/torch-eager.jsonl', import.meta.url));

describe('baseline runs (--baseline)', () => {
  it('reads what bench/baselines prints: epochs, per-step losses, peaks, the summary', () => {
    const baseline = readBaseline(fixture);
    expect(baseline.name).toBe('torch-eager');
    expect(baseline.epochs).toHaveLength(3);
    expect(baseline.epochs[0]!.losses).toHaveLength(40);
    expect(baseline.medianEpochMs).toBeCloseTo((1476.9 + 1479.5) / 2, 6); // the first epoch is warm-up
    expect(baseline.epochSpread).toMatchObject({ n: 2, min: 1476.9, max: 1479.5 });
    expect(baseline.peakAllocatedBytes).toBe(240_700_000);
    expect(baseline.peakReservedBytes).toBe(262_144_000);
    expect(baseline.accuracy).toBe(0.9733);
    expect(baseline.about).toEqual({ gpu: 'NVIDIA H100 80GB HBM3', torch: '2.11.0' });
  });

  it.each([
    ['not json', /1: expected a JSON object per line/],
    ['[1]', /1: expected a JSON object/],
    ['{"epoch":1}', /expected a string 'peer'/],
    ['{"peer":"a","epoch":1,"epoch_ms":"fast","loss":1,"accuracy":0.5}', /finite number for 'epoch_ms'/],
    ['{"peer":"a","epoch":1,"epoch_ms":-3,"loss":1,"accuracy":0.5}', /positive 'epoch_ms'/],
    ['{"peer":"a","epoch":1,"epoch_ms":3,"loss":1,"accuracy":0.5,"losses":[1,"x"]}', /array of finite numbers for 'losses'/],
    [
      '{"peer":"a","epoch":1,"epoch_ms":3,"loss":1,"accuracy":0.5}\n{"peer":"b","epoch":2,"epoch_ms":3,"loss":1,"accuracy":0.5}',
      /2: expected one baseline per file/,
    ],
    ['{"peer":"a","summary":true}', /no epoch records/],
    ['', /no epoch records/],
  ])('rejects %j with a BaselineFormatError naming the line', (text, message) => {
    expect(() => parseBaseline(text, 'p.jsonl')).toThrow(BaselineFormatError);
    expect(() => parseBaseline(text, 'p.jsonl')).toThrow(message);
  });

  it('a missing file is a BaselineFormatError naming it', () => {
    expect(() => readBaseline('/no/such/baseline.jsonl')).toThrow(/\/no\/such\/baseline.jsonl:0: cannot read it \(ENOENT\)/);
  });
});
