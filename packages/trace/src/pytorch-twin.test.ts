import { describe, expect, it } from 'vitest';
import '@gpumem/allocator-caching';
import { pytorchTwin, pytorchTwinOptions } from './pytorch-twin.js';

describe("PyTorch's allocator twin from a snapshot's allocator_settings", () => {
  it('takes no options for a default run, and is labelled as PyTorch allocator', () => {
    // PyTorch 2.11 writes max_split_size SIZE_MAX as -1, and every roundup count 0 when unset
    const defaults = {
      PYTORCH_CUDA_ALLOC_CONF: '',
      max_split_size: -1,
      garbage_collection_threshold: 0,
      expandable_segments: false,
      roundup_power2_divisions: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [String(2 ** i), 0])),
    };
    expect(pytorchTwinOptions(defaults)).toEqual({});
    expect(pytorchTwinOptions(undefined)).toEqual({});
    expect(pytorchTwin(defaults)).toEqual({ label: "caching (PyTorch's allocator)", name: 'caching', options: {} });
  });

  it('carries expandable segments, max_split_size, the GC threshold and roundup_power2_divisions', () => {
    const settings = {
      max_split_size: 128 * 2 ** 20,
      garbage_collection_threshold: 0.6,
      expandable_segments: true,
      roundup_power2_divisions: { '1': 4, '2': 4, '1024': 8 },
    };
    expect(pytorchTwinOptions(settings)).toEqual({
      expandableSegments: true,
      maxSplitSizeBytes: 128 * 2 ** 20,
      garbageCollectionThreshold: 0.6,
      roundupPower2Divisions: '[1:4,2:4,1024:8]',
    });
    expect(pytorchTwin(settings).label).toBe(
      "caching (PyTorch's allocator) with expandableSegments=true, maxSplitSizeBytes=134217728, garbageCollectionThreshold=0.6, roundupPower2Divisions=[1:4,2:4,1024:8]",
    );
    // an older list form: one count per interval, 1 MiB first
    expect(pytorchTwinOptions({ roundup_power2_divisions: [2, 2, 0] })).toEqual({ roundupPower2Divisions: '[1:2,2:2,4:0]' });
  });
});
