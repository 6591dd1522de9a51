// Block bookkeeping that pool_resource and expandable_resource share (a private header): the lock,
// live-pointer lookups, record_stream's used_on list, the waits that order a reuse after other
// streams, the list of blocks parked on events, and splitting and merging block records.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/stream_ordering.hpp"
#include "pool_detail.hpp"
#include "stream_waits.hpp"

namespace gpumem::detail::pool {

// std::mutex measured slower than the spin lock for uncontended pairs (see tests/pool_microbench);
// define GPUMEM_POOL_STD_MUTEX to compare again.
#ifdef GPUMEM_POOL_STD_MUTEX
using resource_lock = std::mutex;
#else
using resource_lock = spin_lock;
#endif

// ----- live blocks ----------------------------------------------------------------------------

// The slot of the live block at `ptr`; throws for a pointer the resource did not hand out.
GPUMEM_POOL_INLINE std::size_t live_slot(const live_table& live, const void* ptr) {
  const std::size_t slot = live.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (slot == live_table::npos) throw_unknown_pointer(ptr);
  return slot;
}

// The bytes asked for the live block at `ptr`; 0 for a pointer the resource did not hand out.
inline std::size_t live_requested(const live_table& live, const void* ptr) noexcept {
  const std::size_t slot = live.find(reinterpret_cast<std::uintptr_t>(ptr));
  return slot == live_table::npos ? 0 : live.at(slot)->requested;
}

// record_stream: live block `b` is also used on `stream`, so its free must wait for that stream.
inline void note_used_on(block* b, stream_handle stream) {
  if (stream == b->stream) return;  // its own stream orders its reuse already
  for (stream_handle s : b->used_on) {
    if (s == stream) return;
  }
  b->used_on.push_back(stream);
}

// ----- ordering between streams ---------------------------------------------------------------

// Free block `b` holds memory freed on the streams in b->used_on besides its own: `stream` is
// about to use it, so it waits for them first (it need not wait for itself).
GPUMEM_POOL_COLD inline void order_after_used_on(stream_ordering& ordering, const block* b, stream_handle stream) {
  for (stream_handle s : b->used_on) {
    if (s != stream) order_after(ordering, stream, s);
  }
}

// At free: records an event on every stream record_stream named (but the one freeing, which orders
// its own reuse). Deallocation does not throw for driver failures: a block whose event could not be
// recorded is quarantined (never reused) rather than reused too early.
GPUMEM_POOL_COLD inline void record_use_events(stream_ordering& ordering, block* b,
                                               stream_handle freeing_stream) noexcept {
  if (!detail::record_use_events(ordering, b->used_on, freeing_stream, b->events)) b->quarantined = true;
  b->used_on.clear();
}

// A stream was destroyed: no list of streams to wait on names it any more.
inline void forget_used_on(block* b, stream_handle gone) noexcept {
  std::vector<stream_handle>& on = b->used_on;
  if (!on.empty()) on.erase(std::remove(on.begin(), on.end(), gone), on.end());
  if (b->state == block_state::free) b->mixed = !on.empty();
}

// ----- blocks parked on events (record_stream) ------------------------------------------------

// Freed blocks that wait for events recorded on the streams record_stream named, linked through
// list_prev/list_next.
class pending_list {
 public:
  block* head() const noexcept { return head_; }
  bool empty() const noexcept { return head_ == nullptr; }
  std::size_t size() const noexcept { return count_; }

  void push(block* b) noexcept {
    b->list_prev = nullptr;
    b->list_next = head_;
    if (head_ != nullptr) head_->list_prev = b;
    head_ = b;
    ++count_;
  }

  bool has_stream(stream_handle stream) const noexcept {
    for (const block* b = head_; b != nullptr; b = b->list_next) {
      if (b->stream == stream) return true;
    }
    return false;
  }

  // Unlinks the blocks whose events have all completed and hands each to `release`. An event that
  // cannot be queried counts as not complete: its block waits rather than being reused too early.
  template <class Release>
  void process(stream_ordering& ordering, Release&& release) noexcept {
    for (block* b = head_; b != nullptr;) {
      block* next = b->list_next;
      if (!b->quarantined) {
        std::size_t kept = 0;
        for (event_handle event : b->events) {
          bool complete = false;
          try {
            complete = ordering.query(event);
          } catch (...) {
          }
          if (complete) {
            ordering.release(event);
          } else {
            b->events[kept++] = event;
          }
        }
        b->events.resize(kept);
        if (kept == 0) {
          unlink(b);
          release(b);
        }
      }
      b = next;
    }
  }

  // Waits on the host for every parked event; a failure is ignored (process keeps that block).
  void synchronize(stream_ordering& ordering) const noexcept {
    for (const block* b = head_; b != nullptr; b = b->list_next) {
      for (event_handle event : b->events) {
        try {
          ordering.synchronize(event);
        } catch (...) {
        }
      }
    }
  }

  // For a destructor: waits for every parked event (record_stream's promise) and releases it.
  void drain(stream_ordering& ordering) noexcept {
    for (block* b = head_; b != nullptr; b = b->list_next) {
      for (event_handle event : b->events) {
        try {
          ordering.synchronize(event);
        } catch (...) {
        }
        ordering.release(event);
      }
      b->events.clear();
    }
  }

 private:
  void unlink(block* b) noexcept {
    if (b->list_prev != nullptr) {
      b->list_prev->list_next = b->list_next;
    } else {
      head_ = b->list_next;
    }
    if (b->list_next != nullptr) b->list_next->list_prev = b->list_prev;
    b->list_prev = b->list_next = nullptr;
    --count_;
  }

  block* head_ = nullptr;
  std::size_t count_ = 0;
};

// ----- splitting and merging --------------------------------------------------------------------

// The first record of a fresh segment (or range): one free block over all of it, on `stream`.
// The caller has reserved the record and puts the block in a free index.
inline block* first_block(block_store& blocks, segment* seg, stream_handle stream) noexcept {
  block* b = blocks.take();
  b->addr = seg->base;
  b->size = seg->size;
  b->prev_in_segment = b->next_in_segment = nullptr;
  b->seg = seg;
  b->stream = stream;
  b->state = block_state::free;
  seg->first = b;
  return b;
}

// Cuts `b` (out of any index) to `rounded` bytes and returns the rest as a new free record on b's
// stream, not yet in an index; nullptr when nothing is left. The caller has reserved the record.
GPUMEM_POOL_INLINE block* split_block(block_store& blocks, block* b, std::size_t rounded) noexcept {
  if (b->size <= rounded) return nullptr;
  block* rest = blocks.take();
  rest->addr = b->addr + rounded;
  rest->size = b->size - rounded;
  rest->seg = b->seg;
  rest->stream = b->stream;
  rest->state = block_state::free;
  rest->prev_in_segment = b;
  rest->next_in_segment = b->next_in_segment;
  if (rest->next_in_segment != nullptr) rest->next_in_segment->prev_in_segment = rest;
  b->next_in_segment = rest;
  b->size = rounded;
  return rest;
}

// Joins `absorbed` into its lower neighbour `survivor` (both out of any index) and frees its record.
GPUMEM_POOL_INLINE void merge_into(block_store& blocks, block* survivor, block* absorbed) noexcept {
  survivor->size += absorbed->size;
  // Only a block with a lower neighbour is ever absorbed, so seg->first never changes here.
  absorbed->prev_in_segment->next_in_segment = absorbed->next_in_segment;
  if (absorbed->next_in_segment != nullptr) absorbed->next_in_segment->prev_in_segment = absorbed->prev_in_segment;
  blocks.give(absorbed);
}

// Gives back the records of a segment whose blocks are all free (each still in its index).
inline void give_segment_blocks(block_store& blocks, segment* seg) noexcept {
  for (block* b = seg->first; b != nullptr;) {
    block* next = b->next_in_segment;
    b->index->remove(b);
    blocks.give(b);
    b = next;
  }
}

// ----- entry points ---------------------------------------------------------------------------

// What the two resources' public methods share: each takes the impl's lock, then forwards. `Impl`
// has lock, live, pending, counter, allocate, deallocate, process_pending and snapshot.
template <class Impl>
void* locked_allocate(Impl& impl, std::size_t bytes, stream_handle stream) {
  std::lock_guard<resource_lock> guard(impl.lock);
  return impl.allocate(bytes, stream);
}

template <class Impl>
void locked_deallocate(Impl& impl, void* ptr, std::size_t bytes, stream_handle stream) {
  std::lock_guard<resource_lock> guard(impl.lock);
  impl.deallocate(ptr, bytes, stream);
}

template <class Impl>
void locked_record_stream(Impl& impl, void* ptr, stream_handle stream) {
  std::lock_guard<resource_lock> guard(impl.lock);
  note_used_on(impl.live.at(live_slot(impl.live, ptr)), stream);
}

template <class Impl>
std::size_t locked_pending_blocks(Impl& impl) {
  std::lock_guard<resource_lock> guard(impl.lock);
  impl.process_pending();
  return impl.pending.size();
}

template <class Impl>
resource_stats locked_stats(Impl& impl) {
  std::lock_guard<resource_lock> guard(impl.lock);
  impl.process_pending();
  return impl.snapshot();
}

template <class Impl>
void locked_reset_peak(Impl& impl) {
  std::lock_guard<resource_lock> guard(impl.lock);
  impl.counter.reset_peak();
}

template <class Impl>
std::size_t locked_allocation_size(Impl& impl, const void* ptr) {
  std::lock_guard<resource_lock> guard(impl.lock);
  return live_requested(impl.live, ptr);
}

}  // namespace gpumem::detail::pool
