// The out-of-memory report's memory of the recent past: per device and allocator instance, the last
// N allocations and frees (a fixed ring) and the blocks live now (a fixed open-addressing table), so
// that when an allocation fails the blocks live at the window's start, the window's events and the
// failed request can be replayed on other strategies (oom_report.hpp).
//
// Always on unless GPUMEM_OOM_WINDOW=0. Both arrays are allocated once, when the ring is made (the
// device's first allocation); recording an event takes an uncontended mutex, writes one slot of the
// ring and inserts or erases one entry of the table: no allocation, no system call. Host code, no CUDA.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpumem::torch {

enum class ring_action : std::uint8_t { alloc = 0, free = 1 };

struct ring_event {
  std::uint64_t bytes = 0;
  std::uintptr_t ptr = 0;
  std::uintptr_t stream = 0;
  ring_action action = ring_action::alloc;
};

// A block live at the window's start.
struct live_block {
  std::uintptr_t ptr = 0;
  std::uint64_t bytes = 0;
  std::uintptr_t stream = 0;
};

// A copy of a ring, taken at an out-of-memory failure.
struct ring_window {
  std::vector<ring_event> events;     // oldest first
  std::uint64_t recorded = 0;         // events recorded since the ring was made
  bool overflowed = false;            // recorded > capacity: older events were overwritten
  // The blocks live when `events` begins; empty and `live_known` false when the live table ran out
  // of room at some point (more blocks were live at once than it holds).
  std::vector<live_block> live_at_start;
  bool live_known = true;
  double copy_ms = 0;  // how long the copy and the walk back took (counted in the replay's time bound)
};

class event_ring {
 public:
  // `capacity` events (>= 1); the live table holds up to 2 x capacity blocks (at least 4096).
  // Throws std::bad_alloc when the arrays cannot be had.
  explicit event_ring(std::size_t capacity);
  event_ring(const event_ring&) = delete;
  event_ring& operator=(const event_ring&) = delete;

  void record_alloc(const void* ptr, std::uint64_t bytes, const void* stream) noexcept;
  void record_free(const void* ptr, std::uint64_t bytes, const void* stream) noexcept;

  std::size_t capacity() const noexcept { return events_.size(); }
  std::size_t live_capacity() const noexcept { return table_.size() / 2; }

  // The window and the live set at its start. Allocates host memory (the copy); throws
  // std::bad_alloc when it cannot.
  ring_window snapshot() const;

 private:
  struct entry {
    std::uintptr_t ptr = 0;  // 0: empty
    std::uint64_t bytes = 0;
    std::uintptr_t stream = 0;
  };
  void push(const ring_event& e) noexcept;
  std::size_t home(std::uintptr_t ptr) const noexcept;
  void insert(std::uintptr_t ptr, std::uint64_t bytes, std::uintptr_t stream) noexcept;
  bool erase(std::uintptr_t ptr, std::uint64_t& bytes) noexcept;  // bytes: the entry's, when found

  mutable std::mutex mutex_;
  std::vector<ring_event> events_;
  std::uint64_t recorded_ = 0;
  std::vector<entry> table_;  // linear probing, a power of two, at most half full
  int hash_shift_ = 0;        // 64 - log2(table_.size())
  std::size_t live_count_ = 0;
  bool live_lost_ = false;  // a block could not be entered: the live set is no longer known
};

}  // namespace gpumem::torch
