// How a resource orders memory reuse across streams. Device memory uses CUDA events; host memory
// is used synchronously and needs nothing. The pool takes one of these so that its cross-stream
// logic is the same code on a GPU and in host-only tests (which can inject a fake).
#pragma once
#include <memory>

#include "gpumem/stream.hpp"

namespace gpumem {

using event_handle = void*;

class stream_ordering {
 public:
  virtual ~stream_ordering() = default;
  // An event recorded on `stream` now; nullptr where ordering needs no event.
  virtual event_handle record(stream_handle stream) = 0;
  // True once everything queued before the event has finished (always true for nullptr).
  virtual bool query(event_handle event) = 0;
  // Makes later work on `stream` wait for the event.
  virtual void wait(stream_handle stream, event_handle event) = 0;
  // Blocks the host until the event has completed.
  virtual void synchronize(event_handle event) = 0;
  // Returns an event to the ordering's cache. Never throws.
  virtual void release(event_handle event) noexcept = 0;
};

// Host memory: every event is complete at once.
std::unique_ptr<stream_ordering> make_host_ordering();
// CUDA events on `device` (throws invalid_state when the build has no CUDA).
std::unique_ptr<stream_ordering> make_cuda_ordering(int device);
// The right one for memory of `kind` on `device`.
std::unique_ptr<stream_ordering> make_ordering(memory_kind kind, int device);

}  // namespace gpumem
