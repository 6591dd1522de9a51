// expandable_resource: taking and freeing blocks (the free lists of each range, the block freed
// last and left unmerged, parked blocks) and the out-of-memory errors. See expandable_impl.hpp.
#include "expandable_impl.hpp"
#include "expandable_hot_path.hpp"

#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpumem {

GPUMEM_POOL_COLD void expandable_resource::impl::merge_unmerged_now() noexcept {
  block* b = unmerged;
  stream_range* r = range_of(b);
  unmerged = nullptr;
  if (unmerged_pinned) unpin(r, granule_index(r, b->addr), granule_index(r, b->addr + b->size - 1));
  free_block(b, r);
}

GPUMEM_POOL_COLD [[noreturn]] void expandable_resource::impl::throw_larger_than_range(std::size_t bytes) {
  throw_oom(bytes, "the request is larger than the virtual range of a stream (reserveBytes " +
                       format_bytes(options.reserve_bytes) + ")");
}

GPUMEM_POOL_COLD [[noreturn]] void expandable_resource::impl::throw_range_full(std::size_t bytes, const stream_range* r) {
  throw_oom(bytes, "no free run of the stream's " + format_bytes(r->size) +
                       " virtual range is large enough (the blocks in use hold it)");
}

// Why a range reservation can fail with memory to spare: every stream and tag reserves a range of
// address space, which a limit on the process's address space (RLIMIT_AS) counts in full.
GPUMEM_POOL_COLD std::string expandable_resource::impl::address_space_hint() const {
  std::string hint = "; every stream and tag reserves reserveBytes (" + format_bytes_brief(options.reserve_bytes) +
                     ") of address space";
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    hint += ", and this process's address space is limited to " +
            format_bytes_brief(static_cast<std::uint64_t>(limit.rlim_cur)) + " (RLIMIT_AS: ulimit -v, prlimit --as)";
  }
  return hint + ": lower the option reserveBytes (reserve_bytes) to reserve less";
}

[[noreturn]] void expandable_resource::impl::throw_oom(std::size_t bytes, const std::string& reason) {
  merge_unmerged();  // the figures of the merged blocks
  counter.on_oom();
  throw out_of_memory("expandable_resource: out of memory allocating " + format_bytes(bytes) + " (" + reason + ")", bytes,
                      snapshot());
}

// free_block's merge when a piece carries other streams: the merged block's used_on is the union
// of the pieces'. If that list cannot be grown (no memory), the block is left unmerged rather than
// merged without its streams.
GPUMEM_POOL_COLD void expandable_resource::impl::free_block_mixed(block* b, stream_range* r, block* prev, block* next) noexcept {
  block* survivor = prev != nullptr ? prev : b;
  try {
    merge_scratch.clear();
    for (block* piece : {prev, b, next}) {
      if (piece == nullptr) continue;
      for (stream_handle s : piece->used_on) {
        if (std::find(merge_scratch.begin(), merge_scratch.end(), s) == merge_scratch.end()) {
          merge_scratch.push_back(s);
        }
      }
    }
    survivor->used_on.reserve(merge_scratch.size());
  } catch (...) {
    r->free.insert(b);  // unmerged
    largest_dirty = true;
    return;
  }
  if (prev != nullptr) {
    r->free.remove(prev);
    merge_into(blocks, prev, b);
  }
  if (next != nullptr) {
    r->free.remove(next);
    merge_into(blocks, survivor, next);
  }
  survivor->used_on.assign(merge_scratch.begin(), merge_scratch.end());  // within the reserved capacity
  survivor->mixed = !merge_scratch.empty();
  survivor->stream = r->owner;
  r->free.insert(survivor);
  largest_dirty = true;
}

// The largest free run of mapped memory: what one allocation can take with no driver call.
std::size_t expandable_resource::impl::largest_mapped_free_run() const noexcept {
  if (!largest_dirty) return largest_cached;
  std::size_t largest = 0;
  for (const auto& owned : ranges) {
    const stream_range* r = owned.get();
    if (r->asleep) continue;  // nothing mapped
    const std::uintptr_t mapped_end = r->base + r->mapped_top * granule;
    for (const block* b = r->first; b != nullptr; b = b->next_in_segment) {
      if (b->state != block_state::free || b->addr >= mapped_end) continue;
      const std::uintptr_t end = std::min<std::uintptr_t>(b->addr + b->size, mapped_end);
      // Stretches of mapped granules in the block, run by run (adjacent runs make one stretch).
      std::uintptr_t stretch_start = 0;
      bool in_stretch = false;
      for (std::size_t g = granule_index(r, b->addr); r->base + g * granule < end;) {
        const std::uint32_t at = r->runs.at(g);
        if (at == run_table::unmapped) {
          in_stretch = false;
          const auto next = r->runs.by_first().lower_bound(g);
          if (next == r->runs.by_first().end()) break;
          g = next->first;
          continue;
        }
        const mapped_run& run = r->runs.slot(at - 1);
        if (!in_stretch) stretch_start = std::max<std::uintptr_t>(b->addr, r->base + g * granule);
        in_stretch = true;
        g = run.first + run.length;
        const std::uintptr_t stretch_end = std::min<std::uintptr_t>(end, r->base + g * granule);
        largest = std::max<std::size_t>(largest, stretch_end - stretch_start);
      }
    }
  }
  largest_cached = largest;
  largest_dirty = false;
  return largest;
}

resource_stats expandable_resource::impl::snapshot() const noexcept {
  resource_stats s = counter.get();
  s.largest_free_block = static_cast<std::int64_t>(largest_mapped_free_run());
  return s;
}

}  // namespace gpumem
