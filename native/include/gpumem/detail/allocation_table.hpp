// The live allocations of a leaf resource (one upstream call per allocation) and its statistics,
// under one lock. Leaf resources use it to reject pointers they never handed out, double frees and
// wrong sizes before any driver call is made.
#pragma once
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/stats.hpp"

namespace gpumem::detail {

class allocation_table {
 public:
  // Records an allocation of `bytes` for which `reserved` bytes were taken from the driver.
  void add(void* ptr, std::size_t bytes, std::size_t reserved) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.emplace(ptr, entry{bytes, reserved});
    counter_.on_reserve(reserved);
    counter_.on_allocate(bytes);
  }

  // Checks ptr and bytes, forgets the allocation and returns the bytes reserved for it.
  // Throws invalid_argument and changes nothing when the pointer or size is wrong.
  std::size_t remove(void* ptr, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) throw_unknown_pointer(ptr);
    if (it->second.bytes != bytes) throw_size_mismatch(ptr, bytes, it->second.bytes);
    std::size_t reserved = it->second.reserved;
    live_.erase(it);
    counter_.on_deallocate(bytes);
    counter_.on_release(reserved);
    return reserved;
  }

  std::size_t size_of(const void* ptr) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(const_cast<void*>(ptr));
    return it == live_.end() ? 0 : it->second.bytes;
  }

  void count_oom() {
    std::lock_guard<std::mutex> lock(mutex_);
    counter_.on_oom();
  }

  resource_stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counter_.get();
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    counter_.reset_peak();
  }

  // Forgets every allocation and returns them, for a destructor to release.
  std::vector<std::pair<void*, std::size_t>> take_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<void*, std::size_t>> out;
    out.reserve(live_.size());
    for (auto& [ptr, e] : live_) {
      out.emplace_back(ptr, e.reserved);
      counter_.on_deallocate(e.bytes);
      counter_.on_release(e.reserved);
    }
    live_.clear();
    return out;
  }

 private:
  struct entry {
    std::size_t bytes;
    std::size_t reserved;
  };
  mutable std::mutex mutex_;
  std::unordered_map<void*, entry> live_;
  stats_counter counter_;
};

// A leaf resource whose statistics and live-pointer checks come from an allocation_table: one
// driver call per allocation. Subclasses implement allocate/deallocate and say where memory lives.
class leaf_resource : public memory_resource {
 protected:
  allocation_table table_;

 private:
  resource_stats do_stats() const override { return table_.stats(); }
  void do_reset_peak() override { table_.reset_peak(); }
  std::size_t do_allocation_size(const void* ptr) const override { return table_.size_of(ptr); }
};

}  // namespace gpumem::detail
