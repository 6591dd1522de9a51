/**
 * Conversion from tracking events (what a tracking layer records during a run) to a trace.
 * @module
 */
import type { TrackingEvent } from '@gpumem/allocator-core';
import type { AllocationTrace } from './format.js';

/** A trace made of tracking events: times from the first event, the header from the run. */
export function traceFromEvents(events: readonly TrackingEvent[], header: AllocationTrace['header']): AllocationTrace {
  const t0 = events[0]?.timeNs ?? 0;
  return {
    header,
    events: events.map((e) => ({
      timeNs: Math.max(0, e.timeNs - t0),
      action: e.action,
      ptr: e.ptr,
      bytes: e.bytes,
      stream: e.stream,
      tag: e.tag,
      reservedBytes: e.reservedBytes,
    })),
  };
}
