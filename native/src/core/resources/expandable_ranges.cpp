// expandable_resource: the virtual ranges, one per stream and tag: found, made, released when their
// stream goes away, and everything given back at the end. See expandable_impl.hpp.
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

stream_range* expandable_resource::impl::find_range(stream_handle stream, tag_id tag) noexcept {
  if (last_range != nullptr && last_range->owner == stream && last_range->tag == tag) return last_range;
  for (auto& r : ranges) {
    if (r->owner == stream && r->tag == tag) return last_range = r.get();
  }
  return nullptr;
}

// A range for `stream` and `tag`, which have none.
GPUMEM_POOL_COLD stream_range* expandable_resource::impl::new_range(stream_handle stream, tag_id tag, std::size_t bytes) {
  const std::size_t granules = static_cast<std::size_t>(options.reserve_bytes / granule);
  auto r = std::make_unique<stream_range>(granules);
  ranges.reserve(ranges.size() + 1);
  void* base = nullptr;
  try {
    base = memory->reserve_range(options.reserve_bytes);
  } catch (const out_of_memory& e) {
    throw_oom(bytes, "could not reserve the stream's virtual range: " + e.reason() + address_space_hint());
  }
  r->base = reinterpret_cast<std::uintptr_t>(base);
  r->size = options.reserve_bytes;
  r->owner = stream;
  r->tag = tag;
  r->free.insert(detail::pool::first_block(blocks, r.get(), stream));  // reserved by allocate()
  ranges.push_back(std::move(r));
  return last_range = ranges.back().get();
}

// A destroyed stream's range with no block in use: every run unmapped, the range freed.
GPUMEM_POOL_COLD void expandable_resource::impl::release_range(stream_range* r) noexcept {
  if (r->used_blocks != 0 || !quiesce(r)) return;
  while (!r->runs.empty()) {
    const std::uint32_t s = r->runs.by_first().begin()->second;
    if (r->asleep) {
      forget_asleep_run(r, s);
    } else {
      unmap_run(r, s);
    }
  }
  memory->release_range(reinterpret_cast<void*>(r->base), r->size);
  detail::pool::give_segment_blocks(blocks, r);
  if (last_range == r) last_range = nullptr;
  ranges.erase(std::find_if(ranges.begin(), ranges.end(), [r](const auto& p) { return p.get() == r; }));
  largest_dirty = true;
}

void expandable_resource::impl::release_retired_ranges() noexcept {
  for (std::size_t i = ranges.size(); i-- > 0;) {
    if (ranges[i]->owner == retired_stream && ranges[i]->used_blocks == 0) release_range(ranges[i].get());
  }
}

// The destructor's release: every run and range, live blocks or not. Parked events are waited
// for (record_stream's promise); the device is synchronised once, as the streams may be gone.
void expandable_resource::impl::release_everything() noexcept {
  merge_unmerged();
  pending.drain(*ordering);
  memory->synchronize();
  for (auto& r : ranges) {
    for (const auto& [first, s] : r->runs.by_first()) {
      if (!r->asleep) memory->unmap_run(granule_addr(r.get(), first), r->runs.slot(s).length * granule);
    }
    memory->release_range(reinterpret_cast<void*>(r->base), r->size);
  }
  ranges.clear();  // block records go with block_store's chunks
}

// `gone` has been synchronised: no list of streams to wait on names it any more, its range serves
// no new allocation (a new stream with the same handle gets its own), and the range goes as soon
// as none of its blocks is in use.
void expandable_resource::impl::forget_stream(stream_handle gone) noexcept {
  if (gone == nullptr || gone == retired_stream) return;
  merge_unmerged();
  process_pending();
  for (auto& r : ranges) {
    for (block* b = r->first; b != nullptr; b = b->next_in_segment) {
      detail::pool::forget_used_on(b, gone);
      if (b->stream == gone) b->stream = retired_stream;
    }
  }
  last_range = nullptr;
  for (std::size_t i = ranges.size(); i-- > 0;) {  // release_range erases the range it frees
    stream_range* r = ranges[i].get();
    if (r->owner != gone) continue;
    r->owner = retired_stream;
    if (r->used_blocks == 0) release_range(r);
  }
}

}  // namespace gpumem
