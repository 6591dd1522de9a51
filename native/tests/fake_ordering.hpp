// A stream_ordering for host-only tests: events complete when the test says so (or, for random
// tests, after a chosen number of queries), and every call is counted, so the pool's cross-stream
// logic can be checked without a GPU. Streams can be destroyed as on a GPU: an event recorded on, or
// waited for by, a destroyed stream fails as CUDA's do.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/stream_ordering.hpp"

namespace gpumem::test {

struct fake_event {
  stream_handle stream = nullptr;
  bool complete = false;
  bool released = false;
  int queries_until_complete = -1;  // >= 0: completes by itself after that many queries
};

// The counters and events live here, shared with the test, because the pool owns the ordering.
struct fake_ordering_log {
  std::vector<std::unique_ptr<fake_event>> events;
  struct wait_call {
    stream_handle stream;
    fake_event* event;
  };
  std::vector<wait_call> waits;
  std::size_t records = 0;
  std::size_t queries = 0;
  std::size_t synchronizes = 0;
  std::size_t releases = 0;
  int auto_complete_after = -1;  // given to new events
  std::vector<stream_handle> destroyed;  // streams destroyed whose handle no new stream has got

  bool is_destroyed(stream_handle stream) const {
    return std::find(destroyed.begin(), destroyed.end(), stream) != destroyed.end();
  }
  // As gpumem::destroy_stream does on a GPU: the stream's work completes (its events with it), the
  // stream observers hear of it (unless `notify` is false: a destroy behind gpumem's back), and its
  // handle becomes invalid.
  void destroy_stream(stream_handle stream, bool notify = true) {
    for (auto& e : events) {
      if (e->stream == stream) e->complete = true;
    }
    if (notify) notify_stream_destroyed(stream);
    destroyed.push_back(stream);
  }
  // A new stream is created and gets the handle of a destroyed one.
  void reuse_handle(stream_handle stream) {
    destroyed.erase(std::remove(destroyed.begin(), destroyed.end(), stream), destroyed.end());
  }

  std::size_t records_on(stream_handle stream) const {
    std::size_t n = 0;
    for (const auto& e : events) n += e->stream == stream;
    return n;
  }
  std::size_t waits_on(stream_handle stream) const {
    std::size_t n = 0;
    for (const auto& w : waits) n += w.stream == stream;
    return n;
  }
  std::size_t unreleased() const {
    std::size_t n = 0;
    for (const auto& e : events) n += !e->released;
    return n;
  }
  void complete_all() {
    for (auto& e : events) e->complete = true;
  }
};

class fake_ordering final : public stream_ordering {
 public:
  explicit fake_ordering(std::shared_ptr<fake_ordering_log> log) : log_(std::move(log)) {}

  event_handle record(stream_handle stream) override {
    if (log_->is_destroyed(stream)) throw_destroyed("cudaEventRecord");
    ++log_->records;
    auto event = std::make_unique<fake_event>();
    event->stream = stream;
    event->queries_until_complete = log_->auto_complete_after;
    fake_event* raw = event.get();
    log_->events.push_back(std::move(event));
    return raw;
  }
  bool query(event_handle handle) override {
    ++log_->queries;
    auto* event = static_cast<fake_event*>(handle);
    if (event == nullptr) return true;
    if (event->queries_until_complete == 0) event->complete = true;
    if (event->queries_until_complete > 0) --event->queries_until_complete;
    return event->complete;
  }
  void wait(stream_handle stream, event_handle handle) override {
    if (log_->is_destroyed(stream)) throw_destroyed("cudaStreamWaitEvent");
    log_->waits.push_back({stream, static_cast<fake_event*>(handle)});
  }
  void synchronize(event_handle handle) override {
    ++log_->synchronizes;
    if (handle != nullptr) static_cast<fake_event*>(handle)->complete = true;
  }
  void release(event_handle handle) noexcept override {
    ++log_->releases;
    if (handle != nullptr) static_cast<fake_event*>(handle)->released = true;
  }

 private:
  [[noreturn]] static void throw_destroyed(const char* call) {
    throw cuda_error(std::string(call) + " failed: cudaErrorInvalidResourceHandle (the stream was destroyed)", 400,
                     "cudaErrorInvalidResourceHandle");
  }

  std::shared_ptr<fake_ordering_log> log_;
};

inline std::unique_ptr<stream_ordering> make_fake_ordering(std::shared_ptr<fake_ordering_log> log) {
  return std::make_unique<fake_ordering>(std::move(log));
}

// Stream keys for host-only tests: any distinct values will do.
inline stream_handle stream_key(std::uintptr_t n) { return reinterpret_cast<stream_handle>(n); }

}  // namespace gpumem::test
