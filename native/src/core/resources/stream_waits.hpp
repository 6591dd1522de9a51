// Waits between streams through a stream_ordering (a private header): each records an event and
// releases it again, also when the wait throws. The pool, expandable, caching and tiered resources
// order reuse across streams with these.
#pragma once

#include <vector>

#include "gpumem/stream_ordering.hpp"

namespace gpumem::detail {

// Makes later work on `waiter` wait for everything queued on `source` so far.
inline void order_after(stream_ordering& ordering, stream_handle waiter, stream_handle source) {
  event_handle event = ordering.record(source);
  try {
    ordering.wait(waiter, event);
  } catch (...) {
    ordering.release(event);
    throw;
  }
  ordering.release(event);
}

// Blocks the host until everything queued on `stream` so far has finished.
inline void synchronize_stream(stream_ordering& ordering, stream_handle stream) {
  event_handle event = ordering.record(stream);
  try {
    ordering.synchronize(event);
  } catch (...) {
    ordering.release(event);
    throw;
  }
  ordering.release(event);
}

// At free: appends to `events` an event on every stream in `used_on` (those record_stream named)
// but `freeing_stream`, which orders its own reuse. False when one could not be recorded: then every
// event in `events` is released and `events` left empty, and the caller quarantines the block (never
// reused) rather than reuse it too early.
inline bool record_use_events(stream_ordering& ordering, const std::vector<stream_handle>& used_on,
                              stream_handle freeing_stream, std::vector<event_handle>& events) noexcept {
  try {
    events.reserve(events.size() + used_on.size());
    for (stream_handle s : used_on) {
      if (s == freeing_stream) continue;
      event_handle event = ordering.record(s);
      if (event != nullptr) events.push_back(event);  // nullptr: nothing to wait for
    }
  } catch (...) {
    for (event_handle event : events) ordering.release(event);
    events.clear();
    return false;
  }
  return true;
}

}  // namespace gpumem::detail
