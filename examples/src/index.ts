/**
 * @gpumem/examples: strategies written against gpumem's public API. Importing this module
 * registers them (currently the 'arena').
 * @packageDocumentation
 */
export * from './arena/index.js';
