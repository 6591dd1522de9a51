// expandable_resource: mapping the granules a block needs, in runs (one physical allocation each),
// and unmapping idle runs when a release threshold or a failed map asks. See expandable_impl.hpp.
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

// Maps what block `b` (just taken for `bytes`, its granules [first, last] pinned) lacks. If that
// fails, the block goes back among the free and out_of_memory (or the driver's error) is thrown.
GPUMEM_POOL_COLD void expandable_resource::impl::map_block(block* b, stream_range* r, std::size_t bytes, std::size_t first, std::size_t last) {
  auto undo = [&] {
    unpin(r, first, last);
    --r->used_blocks;
    free_block(b, r);  // merges back with the rest it was split from
  };
  std::string failure;
  try {
    failure = ensure_mapped(r, first, last);
  } catch (...) {
    undo();
    throw;
  }
  if (!failure.empty()) {
    undo();  // first, so that the error's figures are those of the resource as it stays
    throw_oom(bytes, failure);
  }
}

// Maps the unmapped granules of [first, last]. When that fails: every parked block whose events can
// be waited for is freed, every stream's idle granules are unmapped, and the map is tried once more.
// Returns why it could not (empty: mapped); other errors (a driver failure) are thrown.
std::string expandable_resource::impl::ensure_mapped(stream_range* r, std::size_t first, std::size_t last) {
  std::size_t missing = 0;
  for (std::size_t g = first; g <= last; ++g) missing += r->runs.at(g) == run_table::unmapped;
  if (missing == 0) return {};
  const std::uint64_t needed = static_cast<std::uint64_t>(missing) * granule;
  if (gc_limit != 0 && counter.get().reserved_bytes + needed > gc_limit) {
    release_idle({gc_limit > needed ? gc_limit - needed : 0, ~std::uint64_t{0}});
  }
  // Mapping past the peak while idle runs are mapped (free blocks in holes this request does not
  // fit, or another stream's) would hold both at the new peak: those runs go first.
  if (options.unmap_idle_before_growth && idle_granules != 0) {
    const resource_stats now = counter.get();
    if (now.reserved_bytes + needed > now.peak_reserved_bytes) {
      const std::uint64_t peak = now.peak_reserved_bytes;
      release_idle({peak > needed ? peak - needed : 0, ~std::uint64_t{0}});
    }
  }
  std::string failure;
  try {
    map_granules(r, first, last);
    return {};
  } catch (const out_of_memory& e) {
    failure = e.reason();
  }
  synchronize_pending();
  if (release_idle({0, 0}) > 0) {
    try {
      map_granules(r, first, last);
      return {};
    } catch (const out_of_memory& e) {
      failure = e.reason();
    }
  }
  return "mapping " + format_bytes(needed) + " more failed after releasing every idle run: " + failure;
}

// Maps the unmapped granules of [first, last] (all pinned by the caller), each stretch of
// consecutive ones as one run (one driver call sequence however many granules it has). On any
// failure unmaps the runs it mapped.
void expandable_resource::impl::map_granules(stream_range* r, std::size_t first, std::size_t last) {
  run_table& runs = r->runs;
  std::size_t g = first;
  try {
    while (g <= last) {
      if (runs.at(g) != run_table::unmapped) {
        ++g;
        continue;
      }
      std::size_t end = g + 1;
      while (end <= last && runs.at(end) == run_table::unmapped) ++end;
      const std::size_t length = end - g;
      // The record first (it may throw bad_alloc), so that a mapped run always has one.
      const std::uint32_t s = runs.add(g, length);
      try {
        memory->map_run(granule_addr(r, g), length * granule);
      } catch (...) {
        runs.remove(s);
        throw;
      }
      mapped_run& run = runs.slot(s);
      run.mapping = true;
      run.busy = length;  // every granule: the caller pinned [first, last]
      runs.mark(s);
      r->mapped_top = std::max(r->mapped_top, end);
      counter.on_reserve(static_cast<std::uint64_t>(length) * granule);
      g = end;
    }
  } catch (...) {
    for (std::size_t k = first; k <= last;) {
      const std::uint32_t at = runs.at(k);
      if (at == run_table::unmapped) {
        ++k;
        continue;
      }
      const mapped_run& run = runs.slot(at - 1);
      k = run.first + run.length;
      if (run.mapping) unmap_run(r, at - 1);
    }
    update_mapped_top(r);
    throw;
  }
  for (std::size_t k = first; k <= last;) {
    mapped_run& run = runs.slot(runs.at(k) - 1);
    run.mapping = false;
    k = run.first + run.length;
  }
  largest_dirty = true;
}

void expandable_resource::impl::unmap_run(stream_range* r, std::uint32_t s) noexcept {
  const mapped_run& run = r->runs.slot(s);
  memory->unmap_run(granule_addr(r, run.first), run.length * granule);
  idle_granules -= run.length - run.busy;
  if (run.busy == 0) --r->idle_runs;
  counter.on_release(static_cast<std::uint64_t>(run.length) * granule);
  r->runs.remove(s);
  largest_dirty = true;
}

// Waits on the host for the work that may still use the range's free memory: its owner's, and that
// of the streams that freed blocks into it. Then no free block needs a wait any more. False (and
// nothing unmapped by the caller) when an event cannot be recorded or waited for.
bool expandable_resource::impl::quiesce(stream_range* r) noexcept {
  try {
    sync_scratch.clear();
    if (r->owner != retired_stream) sync_scratch.push_back(r->owner);
    for (block* b = r->first; b != nullptr; b = b->next_in_segment) {
      if (b->state != block_state::free) continue;
      for (stream_handle s : b->used_on) {
        if (std::find(sync_scratch.begin(), sync_scratch.end(), s) == sync_scratch.end()) sync_scratch.push_back(s);
      }
    }
    for (stream_handle s : sync_scratch) detail::synchronize_stream(*ordering, s);
  } catch (...) {
    return false;
  }
  for (block* b = r->first; b != nullptr; b = b->next_in_segment) {
    if (b->state != block_state::free) continue;
    b->used_on.clear();
    b->mixed = false;
  }
  return true;
}

// Unmaps idle runs (every granule idle), highest first in each range, until `goal` is met.
// Returns how many went.
GPUMEM_POOL_COLD std::size_t expandable_resource::impl::release_idle(release_goal goal) noexcept {
  merge_unmerged();
  auto met = [&] {
    return counter.get().reserved_bytes <= goal.reserved_at_most &&
           static_cast<std::uint64_t>(idle_granules) * granule <= goal.idle_at_most;
  };
  std::size_t released = 0;
  for (auto& owned : ranges) {
    if (met()) break;
    stream_range* r = owned.get();
    if (r->asleep || r->idle_runs == 0 || !quiesce(r)) continue;
    const auto& by_first = r->runs.by_first();
    for (auto next = by_first.end(); next != by_first.begin() && r->idle_runs > 0 && !met();) {
      const auto it = std::prev(next);
      if (r->runs.slot(it->second).busy == 0) {
        unmap_run(r, it->second);  // erases `it`; `next` stays valid
        ++released;
      } else {
        next = it;
      }
    }
    update_mapped_top(r);
  }
  return released;
}

}  // namespace gpumem
