// slab_resource: an example strategy written in C++ against gpumem's memory_resource. Fixed size
// classes carved out of slabs taken from an upstream resource, for workloads that make many
// allocations of a few sizes (per-node buffers, small tensors of one shape).
//
//  - a request is served from the smallest size class that holds it (default 256 B .. 64 KiB,
//    powers of two); each class takes slabs of `slab_bytes` (default 1 MiB) from the upstream and
//    hands out their blocks, 256-byte aligned;
//  - requests larger than the largest class go straight to the upstream ("large" allocations);
//  - freed blocks go back to their slab and are reused at once on the slab's stream: slabs belong
//    to the stream they were taken on, so requests on another stream never reuse them. Free a
//    block on the stream it was allocated on;
//  - slabs are kept when empty; trim() gives empty slabs back to the upstream;
//  - deallocate validates pointer and size before changing anything; an upstream out_of_memory is
//    rethrown with this resource's statistics, after counting it; thread-safe (one mutex).
//
// Header-only, so an application can copy it. Build and run the example: see CMakeLists.txt.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/stats.hpp"

namespace gpumem::examples {

struct slab_options {
  // Block sizes, ascending, each a multiple of 256 and at most slab_bytes.
  std::vector<std::size_t> size_classes{256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  // Bytes taken from the upstream per slab.
  std::size_t slab_bytes = std::size_t{1} << 20;
};

class slab_resource final : public memory_resource {
 public:
  static constexpr std::size_t alignment = 256;

  // `upstream` is not owned and must outlive this resource.
  slab_resource(memory_resource& upstream, slab_options options = {}) : upstream_(upstream), options_(std::move(options)) {
    if (options_.slab_bytes == 0 || options_.slab_bytes % alignment != 0) {
      throw invalid_argument(invalid_argument::kind::range, "slab_bytes",
                             "Expected slab_bytes to be a positive multiple of 256 but received " +
                                 std::to_string(options_.slab_bytes));
    }
    std::size_t previous = 0;
    for (std::size_t size : options_.size_classes) {
      if (size <= previous || size % alignment != 0 || size > options_.slab_bytes) {
        throw invalid_argument(invalid_argument::kind::range, "size_classes",
                               "Expected ascending size classes, multiples of 256 and at most slab_bytes, but received " +
                                   std::to_string(size));
      }
      previous = size;
    }
    classes_.resize(options_.size_classes.size());
  }

  // Gives every slab and large allocation back to the upstream. Never throws.
  ~slab_resource() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& cls : classes_) {
      for (auto& s : cls) give_back(s->base, options_.slab_bytes, s->stream);
    }
    for (auto& [ptr, e] : live_) {
      if (e.owner == nullptr) give_back(ptr, e.bytes, e.stream);
    }
  }

  memory_resource& upstream() const noexcept { return upstream_; }
  const slab_options& options() const noexcept { return options_; }

 private:
  struct slab {
    void* base;
    stream_handle stream;
    std::size_t block_bytes;
    std::vector<std::uint32_t> free_blocks;  // indices of free blocks, a stack
    std::size_t live = 0;
  };
  struct entry {
    std::size_t bytes;      // requested size
    slab* owner;            // the slab holding the block; nullptr for a large allocation
    stream_handle stream;   // the stream a large allocation was made on
  };

  void* do_allocate(std::size_t bytes, stream_handle stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto& sizes = options_.size_classes;
    auto it = std::lower_bound(sizes.begin(), sizes.end(), bytes);
    if (it == sizes.end()) {  // large: straight to the upstream
      void* ptr = upstream_allocate(bytes, bytes, stream);
      live_.emplace(ptr, entry{bytes, nullptr, stream});
      counter_.on_allocate(bytes);
      return ptr;
    }
    auto& cls = classes_[static_cast<std::size_t>(it - sizes.begin())];
    slab* s = nullptr;
    for (auto& candidate : cls) {
      if (candidate->stream == stream && !candidate->free_blocks.empty()) {
        s = candidate.get();
        break;
      }
    }
    if (s == nullptr) s = new_slab(cls, *it, bytes, stream);  // throws, changing nothing
    const std::uint32_t index = s->free_blocks.back();
    s->free_blocks.pop_back();
    ++s->live;
    void* ptr = static_cast<char*>(s->base) + std::size_t{index} * s->block_bytes;
    live_.emplace(ptr, entry{bytes, s, stream});
    counter_.on_allocate(bytes);
    return ptr;
  }

  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) throw_unknown_pointer(ptr);                       // unknown or double free
    if (it->second.bytes != bytes) throw_size_mismatch(ptr, bytes, it->second.bytes);  // before any change
    slab* s = it->second.owner;
    if (s == nullptr) {
      upstream_.deallocate(ptr, bytes, stream);  // may throw invalid_argument: nothing changed yet
      counter_.on_release(bytes);
    } else {
      const auto offset = static_cast<std::size_t>(static_cast<char*>(ptr) - static_cast<char*>(s->base));
      s->free_blocks.push_back(static_cast<std::uint32_t>(offset / s->block_bytes));
      --s->live;
    }
    live_.erase(it);
    counter_.on_deallocate(bytes);
  }

  bool do_prefetch(void* ptr, std::size_t bytes, location to, stream_handle stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const entry& e = find(ptr);
    if (bytes > e.bytes) throw_size_mismatch(ptr, bytes, e.bytes);
    if (e.owner == nullptr) return upstream_.prefetch(ptr, bytes, to, stream);
    // The upstream knows the slab, not the block: prefetch the slab up to the end of the range.
    const auto end = static_cast<std::size_t>(static_cast<char*>(ptr) - static_cast<char*>(e.owner->base)) + bytes;
    return upstream_.prefetch(e.owner->base, end, to, stream);
  }

  // Orders the upstream's eventual free of the slab after `stream`. Blocks are still reused at
  // once on the slab's own stream; a strategy that must order reuse across streams records
  // events instead (see pool_resource).
  void do_record_stream(void* ptr, stream_handle stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const entry& e = find(ptr);
    upstream_.record_stream(e.owner == nullptr ? ptr : e.owner->base, stream);
  }

  resource_stats do_stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    resource_stats s = counter_.get();
    s.largest_free_block = 0;  // the largest block size with a free block
    for (std::size_t i = 0; i < classes_.size(); ++i) {
      for (const auto& sl : classes_[i]) {
        if (!sl->free_blocks.empty()) s.largest_free_block = static_cast<std::int64_t>(options_.size_classes[i]);
      }
    }
    return s;
  }

  void do_reset_peak() override {
    std::lock_guard<std::mutex> lock(mutex_);
    counter_.reset_peak();
  }

  // Gives empty slabs back until at most `bytes_to_keep` stay reserved.
  void do_trim(std::size_t bytes_to_keep) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& cls : classes_) {
      for (auto it = cls.begin(); it != cls.end() && counter_.get().reserved_bytes > bytes_to_keep;) {
        if ((*it)->live != 0) {
          ++it;
          continue;
        }
        upstream_.deallocate((*it)->base, options_.slab_bytes, (*it)->stream);
        counter_.on_release(options_.slab_bytes);
        it = cls.erase(it);
      }
    }
  }

  std::size_t do_allocation_size(const void* ptr) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(const_cast<void*>(ptr));
    return it == live_.end() ? 0 : it->second.bytes;
  }

  memory_kind do_kind() const noexcept override { return upstream_.kind(); }
  int do_device() const noexcept override { return upstream_.device(); }

  // ----- helpers (called with mutex_ held) ---------------------------------------------------------

  const entry& find(void* ptr) const {
    auto it = live_.find(ptr);
    if (it == live_.end()) throw_unknown_pointer(ptr);
    return it->second;
  }

  slab* new_slab(std::vector<std::unique_ptr<slab>>& cls, std::size_t block_bytes, std::size_t requested,
                 stream_handle stream) {
    const std::size_t blocks = options_.slab_bytes / block_bytes;
    auto s = std::make_unique<slab>(slab{nullptr, stream, block_bytes, {}, 0});
    s->free_blocks.reserve(blocks);
    for (std::size_t i = blocks; i > 0; --i) s->free_blocks.push_back(static_cast<std::uint32_t>(i - 1));
    s->base = upstream_allocate(options_.slab_bytes, requested, stream);
    cls.push_back(std::move(s));
    return cls.back().get();
  }

  // Asks the upstream for `bytes` on behalf of a request of `requested` bytes. On out_of_memory
  // the failure is counted and rethrown with this resource's statistics; nothing else changes.
  void* upstream_allocate(std::size_t bytes, std::size_t requested, stream_handle stream) {
    void* ptr = nullptr;
    try {
      ptr = upstream_.allocate(bytes, stream);
    } catch (const out_of_memory& e) {
      counter_.on_oom();
      throw out_of_memory(std::string("slab_resource: ") + e.what(), requested, counter_.get());
    }
    counter_.on_reserve(bytes);
    return ptr;
  }

  // For the destructor: give memory back, swallowing failures (destructors never throw).
  void give_back(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
    try {
      upstream_.deallocate(ptr, bytes, stream);
    } catch (...) {
    }
  }

  memory_resource& upstream_;
  const slab_options options_;
  mutable std::mutex mutex_;
  std::vector<std::vector<std::unique_ptr<slab>>> classes_;  // per size class
  std::unordered_map<void*, entry> live_;
  stats_counter counter_;
};

}  // namespace gpumem::examples
