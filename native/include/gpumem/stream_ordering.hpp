// How a resource orders memory reuse across streams. Device memory uses CUDA events; host memory
// is used synchronously and needs nothing. The pool takes one of these so that its cross-stream
// logic is the same code on a GPU and in host-only tests (which can inject a fake).
#pragma once
#include <functional>
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

// Streams going away. A resource that keeps state keyed by stream handles (the pool's per-stream
// free lists, and the streams its blocks must wait on) has to forget a stream before the stream is
// destroyed: the handle then becomes invalid (an event recorded on it fails), and the next stream
// created may get the same handle. Such a resource registers an observer for its lifetime;
// destroy_stream (device.hpp), which gpumem's Stream#destroy calls, synchronises the stream and
// then notifies every observer before cudaStreamDestroy. Code that destroys a stream some other way
// while a resource may hold state keyed by it must synchronise it and call notify_stream_destroyed
// first.
class stream_observer {
 public:
  // `stream` is about to be destroyed, and every piece of work queued on it has completed. Called
  // under the registry's lock: it must not add or remove observers. Never throws.
  virtual void on_stream_destroyed(stream_handle stream) noexcept = 0;

 protected:
  ~stream_observer() = default;
};

// Registers `observer` (process-wide, thread-safe) until remove_stream_observer. Throws
// std::bad_alloc only.
void add_stream_observer(stream_observer& observer);
// Unregisters `observer`; once this returns, no notification is running in it or will reach it.
void remove_stream_observer(stream_observer& observer) noexcept;
// Tells every registered observer that `stream`, already synchronised, is about to be destroyed.
// The default stream (nullptr) is never destroyed: nothing happens for it.
void notify_stream_destroyed(stream_handle stream) noexcept;

// Host streams with queued work: the host twin of a busy GPU stream, so that stream order can be
// tested on machines without a GPU. Work on a host stream normally runs at once on the calling
// thread; defer_host_work queues work that runs only when the stream is reached, as a kernel still
// running on a GPU stream: by synchronize_host_stream (Stream#synchronize), by waiting on or
// synchronising an event recorded on the stream behind it, or by synchronize_host_streams (the
// host's device synchronise, which the host leaf's deallocate does first, as cudaFree does).
// Thread-safe. Nothing is queued unless defer_host_work is called (the conformance suite does).
void defer_host_work(stream_handle stream, std::function<void()> work);
// Runs the work queued on `stream`. Never throws (the work must not).
void synchronize_host_stream(stream_handle stream) noexcept;
// Runs the work queued on every host stream.
void synchronize_host_streams() noexcept;

// Host memory: an event is complete at once unless work is queued on its stream (defer_host_work);
// waiting on it, or synchronising it, runs that work.
std::unique_ptr<stream_ordering> make_host_ordering();
// CUDA events on `device` (throws invalid_state when the build has no CUDA).
std::unique_ptr<stream_ordering> make_cuda_ordering(int device);
// The right one for memory of `kind` on `device`.
std::unique_ptr<stream_ordering> make_ordering(memory_kind kind, int device);

}  // namespace gpumem
