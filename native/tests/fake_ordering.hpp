// A stream_ordering for host-only tests: events complete when the test says so (or, for random
// tests, after a chosen number of queries), and every call is counted, so the pool's cross-stream
// logic can be checked without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

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
  std::shared_ptr<fake_ordering_log> log_;
};

inline std::unique_ptr<stream_ordering> make_fake_ordering(std::shared_ptr<fake_ordering_log> log) {
  return std::make_unique<fake_ordering>(std::move(log));
}

// Stream keys for host-only tests: any distinct values will do.
inline stream_handle stream_key(std::uintptr_t n) { return reinterpret_cast<stream_handle>(n); }

}  // namespace gpumem::test
