// expandable_resource: the hot path of taking and freeing a block, forced inline (GPUMEM_POOL_INLINE)
// into allocate and deallocate; included by the parts that call it. See expandable_impl.hpp.
#pragma once
#include "expandable_impl.hpp"

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

GPUMEM_POOL_INLINE void* expandable_resource::impl::allocate(std::size_t bytes, stream_handle stream) {
  const tag_id tag = current_tag();
  if (!pending.empty()) process_pending();
  if (bytes > options.reserve_bytes) throw_larger_than_range(bytes);
  // Get what the rest may need first, so that nothing below fails half-way.
  live.reserve_one();
  blocks.reserve(2);
  const std::size_t rounded = round_up(bytes, expandable_resource::rounding);
  if (unmerged != nullptr) {
    const bool pinned = unmerged_pinned;
    if (block* b = take_unmerged(rounded, stream, tag)) return finish_allocate(b, bytes, rounded, pinned);
    merge_unmerged();
  }
  stream_range* r = find_range(stream, tag);
  if (r == nullptr || r->asleep) {
    // A tag seen for the first time is remembered; one asleep is refused, its blocks as they were.
    book.on_allocate(tag);
    r = new_range(stream, tag, bytes);
  }
  block* b = r->free.best_fit(rounded);
  if (b == nullptr) throw_range_full(bytes, r);
  if (b->mixed) order_after_used_on(*ordering, b, stream);  // memory other streams freed into this range
  take_block(b, rounded, stream);
  return finish_allocate(b, bytes, rounded, false);
}

// Live block `b`, just taken: its granules pinned (mapped where they are not), unless `pinned`
// says they still are, then handed out.
GPUMEM_POOL_INLINE void* expandable_resource::impl::finish_allocate(block* b, std::size_t bytes, std::size_t rounded, bool pinned) {
  if (!pinned) {
    stream_range* r = range_of(b);
    const std::size_t first = granule_index(r, b->addr);
    const std::size_t last = granule_index(r, b->addr + rounded - 1);
    if (!pin(r, first, last)) map_block(b, r, bytes, first, last);
  }
  b->requested = bytes;
  range_of(b)->allocated += bytes;
  live.insert(b);
  counter.on_allocate(bytes);
  largest_dirty = true;
  return reinterpret_cast<void*>(b->addr);
}

//
// Freeing a block merges it with its free neighbours, and allocating the same size again on the
// same stream usually cuts the same block off the merged one: two index updates and a record
// given back and taken again, for nothing. So deallocate leaves the block it frees unmerged
// (`unmerged`: free, its granules idle, out of the index) where only its upper neighbour is free,
// and the next allocation takes it back as it is when best fit over the merged blocks would cut
// exactly it; anything else merges it first (merge_unmerged), so that nothing else sees the
// difference. Its granules may even stay counted in use (`unmerged_pinned`, see release_block).

// `unmerged` if best fit over the merged blocks would cut exactly it for `rounded` bytes on
// `stream` in `tag` (whose range is then awake: a sleep merges `unmerged` first, and a free in a
// sleeping range merges its block at once); else nullptr. The merged block would be its bytes and
// its upper neighbour `next`'s, from its address: cut at its size, that gives it and `next` back.
// Best fit takes the merged block when the index without it picks `next` and `next` is alone in
// the highest size class held (free_index::largest): the merged block would then be alone in that
// class or a higher one, with nothing between.
GPUMEM_POOL_INLINE block* expandable_resource::impl::take_unmerged(std::size_t rounded, stream_handle stream, tag_id tag) noexcept {
  block* b = unmerged;
  stream_range* r = range_of(b);
  if (b->size != rounded || r->owner != stream || r->tag != tag) return nullptr;
  block* next = b->next_in_segment;
  // The index has not changed since the last check that passed (the usual pair): it passes again.
  if (r->fit_checked_version != r->free_version || r->fit_checked_size != rounded || r->fit_checked_next != next) {
    if (r->free.best_fit(rounded) != next || next->list_prev != nullptr || next->list_next != nullptr ||
        r->free.largest() != next->size) {
      return nullptr;
    }
    r->fit_checked_version = r->free_version;
    r->fit_checked_size = rounded;
    r->fit_checked_next = next;
  }
  unmerged = nullptr;
  b->stream = stream;
  b->state = block_state::live;
  ++r->used_blocks;
  return b;
}

// Takes free block `b` out of the index for `rounded` bytes on `stream` (its range's owner, which
// has waited on b's other streams). The rest, if any, is split off and stays free: with the waits
// done, neither piece needs any more.
GPUMEM_POOL_INLINE void expandable_resource::impl::take_block(block* b, std::size_t rounded, stream_handle stream) noexcept {
  stream_range* r = range_of(b);
  ++r->free_version;
  r->free.remove(b);
  // The rest's record was reserved by allocate().
  if (block* rest = detail::pool::split_block(blocks, b, rounded)) r->free.insert(rest);
  b->used_on.clear();  // a live block's used_on is record_stream's
  b->mixed = false;
  b->stream = stream;
  b->state = block_state::live;
  ++r->used_blocks;
}

GPUMEM_POOL_INLINE void expandable_resource::impl::deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  merge_unmerged();
  const std::size_t slot = live_slot(live, ptr);
  block* b = live.at(slot);
  if (b->requested != bytes) throw_size_mismatch(ptr, bytes, b->requested);
  stream_range* r = range_of(b);
  const bool foreign = stream != r->owner;  // the owner must wait on `stream` before reusing it
  if (foreign) b->used_on.reserve(b->used_on.size() + 1);  // may throw: before any change
  if (!b->used_on.empty()) detail::pool::record_use_events(*ordering, b, stream);
  if (foreign) {
    b->used_on.push_back(stream);  // within the reserved capacity
    b->mixed = true;
  }
  live.erase_at(slot);
  counter.on_deallocate(bytes);
  r->allocated -= bytes;
  if (r->asleep || retained_backups != 0) forget_saved(r->tag, b);
  largest_dirty = true;
  if (!b->events.empty() || b->quarantined) {
    b->state = block_state::pending;  // its granules stay pinned until the events complete
    pending.push(b);
  } else {
    release_block(b, true);
  }
}

// A block no work holds any more: its granules unpinned, the block back among the free, and the
// idle granules released if that passes the release threshold (or the range is a destroyed
// stream's and now empty).
// `may_stay_unmerged`: deallocate's own block, which may be left unmerged (see take_unmerged).
//
// A block left unmerged keeps its granules counted in use where unpinning them could not take the
// idle granules past the release threshold (always, by default): then nothing looks at the idle
// count before merge_unmerged unpins them, and a reuse of the block needs no granule work at all.
GPUMEM_POOL_INLINE void expandable_resource::impl::release_block(block* b, bool may_stay_unmerged) noexcept {
  stream_range* r = range_of(b);
  --r->used_blocks;
  block* prev = b->prev_in_segment;
  block* next = b->next_in_segment;
  if (may_stay_unmerged && !r->asleep && next != nullptr && next->state == block_state::free &&
      (prev == nullptr || prev->state != block_state::free) && !b->mixed && !next->mixed &&
      r->owner != retired_stream) {
    b->state = block_state::free;
    b->stream = r->owner;
    unmerged = b;
    unmerged_pinned = idle_granules + granules_at_most(b->size) <= idle_granules_kept;
    if (!unmerged_pinned) unpin(r, granule_index(r, b->addr), granule_index(r, b->addr + b->size - 1));
    largest_dirty = true;
  } else {
    unpin(r, granule_index(r, b->addr), granule_index(r, b->addr + b->size - 1));
    free_block(b, r);
    if (r->asleep && !r->cache_sleeps && r->idle_runs != 0) forget_asleep_idle_runs(r);
  }
  if (r->owner == retired_stream && r->used_blocks == 0) {
    release_range(r);
  } else if (idle_granules > idle_granules_kept) {  // idle bytes past release_threshold
    release_idle({~std::uint64_t{0}, options.release_threshold});
  }
}

// Returns `b` to its range's free blocks, merged with free neighbours; the merged block keeps the
// union of the streams its pieces must be waited on for. If that list cannot be grown (no memory),
// the block is left unmerged rather than merged without its streams.
GPUMEM_POOL_INLINE void expandable_resource::impl::free_block(block* b, stream_range* r) noexcept {
  ++r->free_version;
  b->state = block_state::free;
  b->stream = r->owner;
  block* prev = b->prev_in_segment;
  block* next = b->next_in_segment;
  const bool merge_prev = prev != nullptr && prev->state == block_state::free;
  const bool merge_next = next != nullptr && next->state == block_state::free;
  if ((merge_prev || merge_next) && (b->mixed || (merge_prev && prev->mixed) || (merge_next && next->mixed))) {
    free_block_mixed(b, r, merge_prev ? prev : nullptr, merge_next ? next : nullptr);
    return;
  }
  if (merge_prev) {
    r->free.remove(prev);
    merge_into(blocks, prev, b);
    b = prev;
  }
  if (merge_next) {
    r->free.remove(next);
    merge_into(blocks, b, next);
  }
  b->stream = r->owner;
  r->free.insert(b);
  largest_dirty = true;
}

}  // namespace gpumem
