// Compiled by src/typed-options.test.ts: each @ts-expect-error must be an error, everything else must compile.
import { createAllocator } from '@gpumem/allocator-core';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-tiered';

const name: string = process.argv[2] ?? 'host';

createAllocator('pool', { maxReservedBytes: 1 << 30 });
createAllocator('host', { limitBytes: 1 << 20 });
createAllocator('my-plugin', { anything: true }); // a plug-in's name: options unchecked
createAllocator(name, { whatever: 1 }); // a name known only at run time

// @ts-expect-error a wrong type for a built-in strategy's option
createAllocator('pool', { maxReservedBytes: 'lots' });
// @ts-expect-error a misspelt option of a built-in strategy
createAllocator('pool', { maxReservedByte: 1 });
// @ts-expect-error a misspelt option of a core strategy
createAllocator('host', { limitbytes: 5 });

// The types come from each strategy's options definition: kinds, literal sets and required keys.
createAllocator('pool', { upstream: 'host', faultInjection: { failEvery: 2 }, peerAccess: [1] });
createAllocator('plugin', { library: './libslab.so', options: { slab_bytes: 1 << 20 }, device: 'host' });
createAllocator('native', { library: './libslab.so' }); // the deprecated name: typed as 'plugin'
// @ts-expect-error a value outside a oneOf option's set
createAllocator('pool', { upstream: 'gpu' });
// @ts-expect-error a wrong type inside a shared native-layer option
createAllocator('host', { faultInjection: { failEvery: 'often' } });
// @ts-expect-error a required option left out
createAllocator('plugin', { device: 'host' });
// @ts-expect-error a required option left out, by the deprecated name
createAllocator('native', { device: 'host' });

// The registry's sleep flag in the type: sleep and wake are present on the strategies that have it.
createAllocator('expandable').sleep({ keep: ['weights'] });
createAllocator('tiered').wake();
createAllocator('expandable').tagStats();
// @ts-expect-error a strategy without the sleep flag: sleep may be absent
createAllocator('pool').sleep();
