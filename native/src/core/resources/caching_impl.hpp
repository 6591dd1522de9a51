// caching_resource's implementation, shared by the files that hold its parts (a private header,
// internal to gpumem_core): the block records and pools, and the impl with its malloc and free (the
// hot path, kept here so that it inlines). The other parts, one concern each:
//   caching_release.cpp   giving memory back: cached blocks released, a stream going away, the end
//   caching_segments.cpp  expandable segments: pages mapped and unmapped through the VMM (vmm_runs.hpp)
//   caching_resource.cpp  the public class, its options and the strategy's descriptor
#pragma once
#include "gpumem/caching_resource.hpp"
#include "gpumem/address_only.hpp"
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#include "gpumem/cuda_resource.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/stats.hpp"
#include "gpumem/strategy_options.hpp"
#include "gpumem/strategy_registry.hpp"
#include "stream_waits.hpp"
#include "vmm_runs.hpp"

namespace gpumem {
namespace detail::caching {

constexpr std::size_t default_host_address_space = std::size_t{64} << 30;

struct block_pool;
struct expandable_segment;

// PyTorch's Block: a piece of a segment (or of an expandable segment's range, mapped or not).
struct cblock {
  stream_handle stream = nullptr;
  std::size_t size = 0;
  std::uintptr_t ptr = 0;
  block_pool* pool = nullptr;
  std::uint64_t order = 0;  // the segment's creation order: equal sizes are told apart by it, then ptr
  bool allocated = false;
  bool mapped = true;
  std::size_t requested = 0;
  std::uint64_t gc_count_base = 0;
  cblock* prev = nullptr;
  cblock* next = nullptr;
  expandable_segment* segment = nullptr;  // expandable mode: the range it lies in
  std::vector<stream_handle> stream_uses;  // record_stream's streams while allocated

  bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
};

// BlockComparatorSize: stream, then size, then address (the segment's order, then the pointer).
struct by_size {
  bool operator()(const cblock* a, const cblock* b) const noexcept {
    if (a->stream != b->stream) return std::less<stream_handle>()(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    if (a->order != b->order) return a->order < b->order;
    return a->ptr < b->ptr;
  }
};

// BlockComparatorAddress: stream, then address.
struct by_address {
  bool operator()(const cblock* a, const cblock* b) const noexcept {
    if (a->stream != b->stream) return std::less<stream_handle>()(a->stream, b->stream);
    if (a->order != b->order) return a->order < b->order;
    return a->ptr < b->ptr;
  }
};

struct block_pool {
  explicit block_pool(bool is_small) : small(is_small) {}
  std::set<cblock*, by_size> blocks;         // free, mapped
  std::set<cblock*, by_address> unmapped;    // expandable segments' unmapped ranges
  const bool small;
  std::uint64_t get_free_blocks_call_count = 0;

  void insert_into_blocks(cblock* b) {
    b->gc_count_base = get_free_blocks_call_count;
    blocks.insert(b);
  }
};

// ExpandableSegment: a virtual range whose pages (2 MiB small, 20 MiB large) are mapped one
// physical allocation each.
struct expandable_segment {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  std::size_t page = 0;
  stream_handle stream = nullptr;
  std::uint64_t order = 0;
  std::vector<bool> mapped;  // per page
};

struct range {
  std::uintptr_t ptr = 0;
  std::size_t size = 0;
};

// The search key of a request (lower_bound over blocks ordered by stream, size, address).
inline cblock key_of(stream_handle stream, std::size_t size) {
  cblock key;
  key.stream = stream;
  key.size = size;
  return key;
}

}  // namespace detail::caching

using namespace detail::caching;

struct caching_resource::impl final : stream_observer {
  impl(memory_resource* up, std::unique_ptr<vmm> mem, const caching_options& opts,
       std::unique_ptr<stream_ordering> order)
      : upstream(up), memory(mem ? std::make_unique<detail::vmm_runs>(std::move(mem)) : nullptr), options(opts), ordering(std::move(order)) {
    divisions = parse_roundup_power2_divisions(options.roundup_power2_divisions);
    max_split = options.max_split_size_bytes == 0 ? std::numeric_limits<std::size_t>::max() : options.max_split_size_bytes;
  }

  ~impl() { release_everything(); }

  // ----- malloc ---------------------------------------------------------------------------------

  struct params {
    stream_handle stream;
    block_pool* pool;
    std::size_t size;        // rounded
    std::size_t alloc_size;  // a new segment's
    cblock* block = nullptr;
    std::string failure;
  };

  void* allocate(std::size_t orig_size, stream_handle stream) {
    if (orig_size > std::numeric_limits<std::size_t>::max() / 2) {
      throw_oom(orig_size, "the request exceeds any segment size");
    }
    live.reserve(live.size() + 1);
    const std::size_t size = caching_round_size(orig_size, divisions);
    params p{stream, size <= small_size ? &small_blocks : &large_blocks, size, caching_allocation_size(size), nullptr, {}};
    bool found = get_free_block(p);
    if (!found) {
      if (options.allowed_memory_bytes > 0 && options.garbage_collection_threshold > 0) garbage_collect_cached_blocks();
      found = alloc_block(p) || (release_available_cached_blocks(p) && alloc_block(p)) ||
              (release_cached_blocks() && alloc_block(p));
    }
    if (!found) throw_oom(orig_size, p.failure.empty() ? "no segment could be had" : p.failure);
    cblock* b = alloc_found_block(p, orig_size);
    live.emplace(b->ptr, b);
    counter.on_allocate(orig_size);
    return reinterpret_cast<void*>(b->ptr);
  }

  bool get_free_block(params& p) {
    block_pool& pool = *p.pool;
    if (options.allowed_memory_bytes > 0 && options.garbage_collection_threshold > 0) ++pool.get_free_blocks_call_count;
    cblock key = key_of(p.stream, p.size);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != p.stream) return false;
    if ((*it)->segment != nullptr) {
      // Best fit counts the unmapped room right after a block as its own: it can grow into it.
      auto expandable_size = [](const cblock* b) { return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0); };
      auto next = std::next(it);
      while ((*it)->segment != nullptr && next != pool.blocks.end() && (*next)->stream == p.stream &&
             expandable_size(*next) < expandable_size(*it)) {
        it = next++;
      }
    }
    // An oversize block is not given to a small request, nor to a large one it exceeds by much.
    if (p.size < max_split && (*it)->size >= max_split) return false;
    if (p.size >= max_split && (*it)->size >= p.size + options.max_non_split_rounding_bytes) return false;
    p.block = *it;
    pool.blocks.erase(it);
    return true;
  }

  bool alloc_block(params& p) {
    const std::size_t cap = options.allowed_memory_bytes;
    if (cap > 0 && (p.alloc_size > cap || total_reserved() > cap - p.alloc_size)) {
      p.failure = "a segment of " + format_bytes(p.alloc_size) + " would pass the allowed " + format_bytes(cap);
      return false;
    }
    if (memory) return try_allocate_expandable_block(p);
    void* ptr = nullptr;
    try {
      ptr = upstream->allocate(p.alloc_size, p.stream);
    } catch (const out_of_memory& e) {
      p.failure = std::string("upstream: ") + e.reason();
      return false;
    }
    auto* b = new cblock;
    b->stream = p.stream;
    b->size = p.alloc_size;
    b->ptr = reinterpret_cast<std::uintptr_t>(ptr);
    b->pool = p.pool;
    b->order = next_order++;
    segments.emplace(b->ptr, b->size);
    counter.on_reserve(p.alloc_size);
    p.block = b;
    return true;
  }

  bool should_split(const cblock* b, std::size_t size) const noexcept {
    const std::size_t remaining = b->size - size;
    if (b->pool->small || options.expandable_segments) return remaining >= min_block_bytes;
    return size < max_split && remaining > small_size;
  }

  cblock* alloc_found_block(params& p, std::size_t orig_size) {
    cblock* b = p.block;
    if (should_split(b, p.size)) {
      cblock* remaining = b;
      b = new cblock;
      b->stream = p.stream;
      b->size = p.size;
      b->ptr = remaining->ptr;
      b->pool = remaining->pool;
      b->order = remaining->order;
      b->segment = remaining->segment;
      b->prev = remaining->prev;
      if (b->prev != nullptr) b->prev->next = b;
      b->next = remaining;
      remaining->prev = b;
      remaining->ptr += p.size;
      remaining->size -= p.size;
      remaining->pool->insert_into_blocks(remaining);
    }
    b->allocated = true;
    b->requested = orig_size;
    return b;
  }

  // ----- free -----------------------------------------------------------------------------------

  void deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
    auto it = live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == live.end()) throw_unknown_pointer(ptr);
    cblock* b = it->second;
    if (b->requested != bytes) throw_size_mismatch(ptr, bytes, b->requested);
    // PyTorch keeps a block on the stream it was allocated on. Work the program queued on the freeing
    // stream, or on streams record_stream named, may still use it: the block's stream waits for
    // them, so that its next user there comes after (PyTorch polls events for the same promise).
    if (stream != b->stream) detail::order_after(*ordering, b->stream, stream);
    for (stream_handle s : b->stream_uses) {
      if (s != b->stream && s != stream) detail::order_after(*ordering, b->stream, s);
    }
    live.erase(it);
    counter.on_deallocate(bytes);
    b->stream_uses.clear();
    free_block(b);
  }

  void free_block(cblock* b) {
    b->allocated = false;
    b->requested = 0;
    block_pool& pool = *b->pool;
    try_merge_blocks(b, b->prev, pool);
    try_merge_blocks(b, b->next, pool);
    pool.insert_into_blocks(b);
  }

  std::size_t try_merge_blocks(cblock* dst, cblock* src, block_pool& pool) {
    if (src == nullptr || src->allocated || dst->mapped != src->mapped) return 0;
    if (dst->prev == src) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev != nullptr) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next != nullptr) dst->next->prev = dst;
    }
    const std::size_t subsumed = src->size;
    dst->size += subsumed;
    if (src->mapped) {
      pool.blocks.erase(src);
    } else {
      pool.unmapped.erase(src);
    }
    delete src;
    return subsumed;
  }

  // ----- giving memory back ---------------------------------------------------------------------
  void release_block(cblock* b);

  bool release_available_cached_blocks(const params& p);

  bool release_cached_blocks();

  void release_blocks(block_pool& pool);

  void garbage_collect_cached_blocks();

  // ----- expandable segments --------------------------------------------------------------------
  bool try_allocate_expandable_block(params& p);

  static bool allocatable(const cblock* b) noexcept { return b != nullptr && !b->allocated; }

  cblock* find_expandable_block(params& p);

  range map_pages(expandable_segment& seg, std::uintptr_t ptr, std::size_t size, std::string& failure);

  range unmap_pages(expandable_segment& seg, std::uintptr_t ptr, std::size_t size) noexcept;

  bool map_block(cblock* to_map, std::size_t size, params& p);

  void unmap_block(cblock* b);

  void release_expandable_segment(cblock* b);

  // ----- streams going away ---------------------------------------------------------------------
  void on_stream_destroyed(stream_handle gone) noexcept override;

  template <class Set>
  static void rekey(Set& set, stream_handle gone) {
    std::vector<cblock*> moved;
    for (auto it = set.begin(); it != set.end();) {
      if ((*it)->stream == gone) {
        moved.push_back(*it);
        it = set.erase(it);
      } else {
        ++it;
      }
    }
    for (cblock* b : moved) {
      b->stream = nullptr;
      set.insert(b);
    }
  }

  // ----- the rest -------------------------------------------------------------------------------

  std::size_t total_reserved() const noexcept { return static_cast<std::size_t>(counter.get().reserved_bytes); }

  [[noreturn]] void throw_oom(std::size_t bytes, const std::string& reason) {
    counter.on_oom();
    throw out_of_memory("caching_resource: out of memory allocating " + format_bytes(bytes) + " (" + reason + ")", bytes,
                        snapshot());
  }

  resource_stats snapshot() const noexcept {
    resource_stats s = counter.get();
    std::size_t largest = 0;
    for (const block_pool* pool : {&small_blocks, &large_blocks}) {
      for (const cblock* b : pool->blocks) largest = std::max(largest, b->size);
    }
    s.largest_free_block = static_cast<std::int64_t>(largest);
    return s;
  }

  void release_everything() noexcept;

  memory_resource* const upstream;              // cudaMalloc or host memory (not expandable)
  const std::unique_ptr<detail::vmm_runs> memory;  // expandable segments
  const caching_options options;
  const std::unique_ptr<stream_ordering> ordering;
  std::vector<std::size_t> divisions;
  std::size_t max_split = 0;

  std::mutex lock;
  stats_counter counter;
  block_pool small_blocks{true};
  block_pool large_blocks{false};
  std::unordered_map<std::uintptr_t, cblock*> live;
  std::unordered_map<std::uintptr_t, std::size_t> segments;  // cudaMalloc'd: base -> size
  std::vector<std::unique_ptr<expandable_segment>> expandables;
  std::uint64_t next_order = 0;
};

}  // namespace gpumem
