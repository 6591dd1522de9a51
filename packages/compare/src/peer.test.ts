import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parsePeer, PeerFormatError, readPeer } from './peer.js';

const fixture = fileURLToPath(new URL('./fixtures/torch-eager.jsonl', import.meta.url));

describe('peer runs (--peer)', () => {
  it('reads what bench/peers prints: epochs, per-step losses, peaks, the summary', () => {
    const peer = readPeer(fixture);
    expect(peer.name).toBe('torch-eager');
    expect(peer.epochs).toHaveLength(3);
    expect(peer.epochs[0]!.losses).toHaveLength(40);
    expect(peer.medianEpochMs).toBeCloseTo((1476.9 + 1479.5) / 2, 6); // the first epoch is warm-up
    expect(peer.epochSpread).toMatchObject({ n: 2, min: 1476.9, max: 1479.5 });
    expect(peer.peakAllocatedBytes).toBe(240_700_000);
    expect(peer.peakReservedBytes).toBe(262_144_000);
    expect(peer.accuracy).toBe(0.9733);
    expect(peer.about).toEqual({ gpu: 'NVIDIA H100 80GB HBM3', torch: '2.11.0' });
  });

  it.each([
    ['not json', /1: expected a JSON object per line/],
    ['[1]', /1: expected a JSON object/],
    ['{"epoch":1}', /expected a string 'peer'/],
    ['{"peer":"a","epoch":1,"epoch_ms":"fast","loss":1,"accuracy":0.5}', /finite number for 'epoch_ms'/],
    ['{"peer":"a","epoch":1,"epoch_ms":-3,"loss":1,"accuracy":0.5}', /positive 'epoch_ms'/],
    ['{"peer":"a","epoch":1,"epoch_ms":3,"loss":1,"accuracy":0.5,"losses":[1,"x"]}', /array of finite numbers for 'losses'/],
    ['{"peer":"a","epoch":1,"epoch_ms":3,"loss":1,"accuracy":0.5}\n{"peer":"b","epoch":2,"epoch_ms":3,"loss":1,"accuracy":0.5}', /2: expected one peer per file/],
    ['{"peer":"a","summary":true}', /no epoch records/],
    ['', /no epoch records/],
  ])('rejects %j with a PeerFormatError naming the line', (text, message) => {
    expect(() => parsePeer(text, 'p.jsonl')).toThrow(PeerFormatError);
    expect(() => parsePeer(text, 'p.jsonl')).toThrow(message);
  });

  it('a missing file is a PeerFormatError naming it', () => {
    expect(() => readPeer('/no/such/peer.jsonl')).toThrow(/\/no\/such\/peer.jsonl:0: cannot read it \(ENOENT\)/);
  });
});
