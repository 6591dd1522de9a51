// Allocation statistics shared by every resource.
#pragma once
#include <algorithm>
#include <cstdint>

namespace gpumem {

// A snapshot. "allocated" counts the bytes callers asked for and still hold; "reserved" what the
// resource took from its upstream (the driver, or another resource) and has not given back.
struct resource_stats {
  std::uint64_t allocated_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t alloc_count = 0;           // allocations served
  std::uint64_t free_count = 0;            // deallocations served
  std::uint64_t upstream_alloc_count = 0;  // calls made to the upstream / driver to get memory
  std::uint64_t upstream_free_count = 0;   // calls made to give memory back
  std::uint64_t oom_count = 0;             // allocations that ended in out_of_memory
  std::int64_t largest_free_block = -1;    // cached free bytes in one piece; -1 where not a pool
  std::uint64_t segment_count = 0;         // upstream allocations currently held
  // Resources with a host tier beside the device (tiered): the part of allocated/reserved bytes
  // (and their peaks) that lives in host memory, and the bytes moved between the tiers by
  // prefetch. -1 (host_*) where the resource has no host tier; the device part is the total less
  // the host part.
  std::int64_t host_allocated_bytes = -1;
  std::int64_t peak_host_allocated_bytes = -1;
  std::int64_t host_reserved_bytes = -1;
  std::int64_t peak_host_reserved_bytes = -1;
  std::uint64_t bytes_moved_to_host = 0;
  std::uint64_t bytes_moved_to_device = 0;
};

// Counters that a resource updates under its own lock. Not thread-safe by itself.
class stats_counter {
 public:
  void on_allocate(std::uint64_t bytes) noexcept {
    s_.allocated_bytes += bytes;
    s_.peak_allocated_bytes = std::max(s_.peak_allocated_bytes, s_.allocated_bytes);
    ++s_.alloc_count;
  }
  void on_deallocate(std::uint64_t bytes) noexcept {
    s_.allocated_bytes -= bytes;
    ++s_.free_count;
  }
  void on_reserve(std::uint64_t bytes) noexcept {
    s_.reserved_bytes += bytes;
    s_.peak_reserved_bytes = std::max(s_.peak_reserved_bytes, s_.reserved_bytes);
    ++s_.upstream_alloc_count;
    ++s_.segment_count;
  }
  void on_release(std::uint64_t bytes) noexcept {
    s_.reserved_bytes -= bytes;
    ++s_.upstream_free_count;
    --s_.segment_count;
  }
  void on_oom() noexcept { ++s_.oom_count; }
  void reset_peak() noexcept {
    s_.peak_allocated_bytes = s_.allocated_bytes;
    s_.peak_reserved_bytes = s_.reserved_bytes;
  }
  const resource_stats& get() const noexcept { return s_; }

 private:
  resource_stats s_;
};

}  // namespace gpumem
