// Records an event per allocation and deallocation (time, action, size, stream, pointer, tag) in
// a bounded ring buffer, with the upstream's reserved bytes after each event: cheap enough to leave on during a run, and the source of memory
// timelines and allocation traces. When the ring is full the oldest events are overwritten and
// counted as dropped.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gpumem/adaptor.hpp"

namespace gpumem {

struct tracking_event {
  std::uint64_t time_ns;  // since the adaptor was created
  std::uint64_t pointer;
  std::uint64_t bytes;
  std::uint64_t stream;
  std::uint64_t reserved_bytes;  // the upstream's reserved bytes right after the event
  std::uint32_t tag;      // the tag current when the event happened (e.g. an op or phase id)
  std::uint8_t action;    // tracking_adaptor::action
};

class tracking_adaptor final : public adaptor_base {
 public:
  enum action : std::uint8_t { allocate_action = 0, free_action = 1, oom_action = 2 };

  tracking_adaptor(memory_resource& upstream, std::size_t capacity);

  void set_tag(std::uint32_t tag) noexcept { tag_.store(tag, std::memory_order_relaxed); }
  std::uint32_t tag() const noexcept { return tag_.load(std::memory_order_relaxed); }
  void set_enabled(bool on) noexcept { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }

  // The events in the ring, oldest first; optionally empties it.
  std::vector<tracking_event> events(bool clear = false);
  std::uint64_t dropped() const;
  std::size_t capacity() const noexcept { return ring_.size(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  void push(action a, const void* ptr, std::size_t bytes, stream_handle stream);

  std::chrono::steady_clock::time_point start_;
  std::atomic<std::uint32_t> tag_{0};
  std::atomic<bool> enabled_{true};
  mutable std::mutex mutex_;
  std::vector<tracking_event> ring_;
  std::size_t next_ = 0;   // where the next event goes
  std::size_t count_ = 0;  // events in the ring
  std::uint64_t dropped_ = 0;
};

}  // namespace gpumem
