// Compiled by src/typed-options.test.ts: each @ts-expect-error must be an error, everything else must compile.
import { createAllocator } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';

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
