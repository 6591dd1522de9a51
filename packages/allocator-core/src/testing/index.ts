/**
 * `@gpumem/allocator-core/testing`: what a strategy's author needs to test it as gpumem tests its
 * own: the conformance suite.
 * @module
 */
export { describeConformance, type ConformanceOptions, type ConformanceTestApi, type ConformanceMatchers } from './conformance.js';
