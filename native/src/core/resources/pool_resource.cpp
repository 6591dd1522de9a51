#include "gpumem/pool_resource.hpp"

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pool_detail.hpp"
#include "pool_options.hpp"
#include "stream_ordered_blocks.hpp"
#include "gpumem/address_only.hpp"
#include "gpumem/cuda_resource.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/strategy_registry.hpp"

namespace gpumem {

namespace {

// The options of strategy 'pool' in a chain_spec (its descriptor's options_type).
const pool_spec& own(const chain_spec& spec) { return spec.options<pool_spec>(); }

using detail::pool::block;
using detail::pool::block_state;
using detail::pool::block_store;
using detail::pool::free_index;
using detail::pool::granule;
using detail::pool::live_slot;
using detail::pool::live_table;
using detail::pool::merge_into;
using detail::order_after;
using detail::pool::order_after_used_on;
using detail::pool::pending_list;
using detail::pool::resource_lock;
using detail::pool::round_up;
using detail::pool::segment;

// The allocation stream of a live block whose stream has been destroyed: no stream handle equals
// it, so that a new stream given the old handle is not taken for the block's own (record_stream).
// Only ever stored in live blocks, which deallocate re-keys to their freeing stream.
char retired_stream_tag;
const stream_handle retired_stream = &retired_stream_tag;

// The free blocks that one stream may reuse without waiting on anything.
struct stream_pool {
  explicit stream_pool(stream_handle s) : stream(s) {}
  free_index& index(bool small) noexcept { return small ? small_blocks : large_blocks; }
  bool empty() const noexcept { return small_blocks.empty() && large_blocks.empty(); }

  stream_handle stream;
  free_index small_blocks;
  free_index large_blocks;
};

void check_options(const pool_options& options) {
  auto check = [](std::size_t value, const char* name) {
    if (value == 0 || value % granule != 0) {
      throw invalid_argument(invalid_argument::kind::range, name,
                             std::string("Expected ") + name + " to be a positive multiple of " +
                                 std::to_string(granule) + " but received " + std::to_string(value));
    }
  };
  check(options.small_segment_bytes, "small_segment_bytes");
  check(options.large_segment_rounding, "large_segment_rounding");
}

}  // namespace

struct pool_resource::impl final : stream_observer {
  impl(memory_resource& upstream_resource, const pool_options& opts, std::unique_ptr<stream_ordering> order)
      : upstream(upstream_resource), options(opts), ordering(std::move(order)) {
    // The default stream's free list always exists: blocks of destroyed streams move there.
    default_pool = add_pool(nullptr);
    // A request rounded past this is large, whatever small_request_limit says: it cannot share a
    // small segment.
    small_limit = std::min(options.small_request_limit, options.small_segment_bytes);
    // Past this, rounding up to a segment would overflow: such a request can only fail.
    max_request = std::numeric_limits<std::size_t>::max() - options.large_segment_rounding - granule;
  }

  ~impl() { release_everything(); }

  // ----- allocate -----------------------------------------------------------------------------

  GPUMEM_POOL_INLINE void* allocate(std::size_t bytes, stream_handle stream) {
    if (!pending.empty()) process_pending();
    if (bytes > max_request) throw_pool_oom(bytes, "the request exceeds any segment size");
    // Get what the rest may need first, so that nothing below fails half-way.
    live.reserve_one();
    blocks.reserve(2);
    const std::size_t rounded = round_up(bytes, granule);
    const bool small = rounded <= small_limit;
    stream_pool* own = pool_for(stream);
    block* b = own->index(small).best_fit(rounded);
    if (b == nullptr) {
      b = allocate_slow(bytes, rounded, small, own);
    } else if (b->mixed) {
      order_after_used_on(*ordering, b, stream);  // merged with memory freed on other streams
    }
    take_block(b, rounded, stream);
    b->requested = bytes;
    live.insert(b);
    counter.on_allocate(bytes);
    return reinterpret_cast<void*>(b->addr);
  }

  // Nothing free on the requesting stream fits: borrow another stream's free block, else grow.
  GPUMEM_POOL_COLD block* allocate_slow(std::size_t bytes, std::size_t rounded, bool small, stream_pool* own) {
    if (block* b = take_from_other_streams(own, small, rounded)) return b;

    const std::size_t segment_bytes =
        small ? options.small_segment_bytes : round_up(rounded, options.large_segment_rounding);
    std::string failure;
    bool asked_upstream = false;
    if (make_room_under_cap(segment_bytes)) {
      asked_upstream = true;
      try {
        return new_segment(segment_bytes, small, own);
      } catch (const out_of_memory& e) {
        failure = std::string("upstream: ") + e.reason();
      }
    }

    // Reclaim: wait for the blocks that record_stream parked and reuse them if one fits; else give
    // every cached free segment back and ask the upstream once more.
    synchronize_pending();
    if (block* b = own->index(small).best_fit(rounded)) {
      if (b->mixed) order_after_used_on(*ordering, b, own->stream);
      return b;
    }
    if (block* b = take_from_other_streams(own, small, rounded)) return b;
    const bool released = release_free_segments(0) > 0;
    if (fits_under_cap(segment_bytes) && (released || !asked_upstream)) {
      try {
        return new_segment(segment_bytes, small, own);
      } catch (const out_of_memory& e) {
        failure = std::string("upstream: ") + e.reason();
      }
    }
    if (failure.empty()) {
      failure = "a segment of " + format_bytes(segment_bytes) + " would exceed max_reserved_bytes " +
                format_bytes(options.max_reserved_bytes);
    }
    throw_pool_oom(bytes, failure);
  }

  // The best fit among the other streams' free blocks, made safe to use on `own` by an event: work
  // on `own` after this waits for everything queued on the owner stream so far (and on the other
  // streams whose freed memory the block holds). The block stays in its owner's index; take_block
  // moves it.
  block* take_from_other_streams(stream_pool* own, bool small, std::size_t rounded) {
    block* best = nullptr;
    for (auto& other : streams) {
      if (other.get() == own) continue;
      block* b = other->index(small).best_fit(rounded);
      if (b != nullptr && free_index::better(b, best)) best = b;
    }
    if (best == nullptr) return nullptr;
    order_after(*ordering, own->stream, best->stream);
    if (best->mixed) order_after_used_on(*ordering, best, own->stream);
    return best;
  }

  // Takes free block `b` out of its index for a request of `rounded` bytes on `stream`, which the
  // caller has ordered after b's streams. The rest, when there is any (always >= 512 bytes, as sizes
  // are multiples of 512), is split off and stays free on b's previous stream. Large blocks split on
  // the same rule as small ones: a remainder is never wasted inside a live block, and it merges back
  // when its neighbour is freed.
  GPUMEM_POOL_INLINE void take_block(block* b, std::size_t rounded, stream_handle stream) noexcept {
    free_index* index = b->index;
    index->remove(b);
    if (block* rest = detail::pool::split_block(blocks, b, rounded)) {
      // The rest still needs b's other streams waited on, unless it stays with the stream that just
      // waited on them. (A swap: take_block cannot allocate; the rest's record came with none.)
      if (b->mixed && b->stream != stream) {
        rest->used_on.swap(b->used_on);
        rest->mixed = true;
      }
      // No merge needed: b had no free neighbour it could merge with, so neither has the rest.
      index->insert(rest);
    }
    if (b->mixed) {
      b->used_on.clear();  // a live block's used_on is record_stream's
      b->mixed = false;
    }
    b->stream = stream;
    b->state = block_state::live;
    ++b->seg->used_blocks;
  }

  bool fits_under_cap(std::size_t segment_bytes) const noexcept {
    const std::size_t cap = options.max_reserved_bytes;
    return cap == 0 || (segment_bytes <= cap && counter.get().reserved_bytes <= cap - segment_bytes);
  }

  // Releases free segments until a new segment of `segment_bytes` fits under max_reserved_bytes.
  bool make_room_under_cap(std::size_t segment_bytes) {
    if (fits_under_cap(segment_bytes)) return true;
    if (segment_bytes > options.max_reserved_bytes) return false;  // releasing cannot help
    release_free_segments(options.max_reserved_bytes - segment_bytes);
    return fits_under_cap(segment_bytes);
  }

  // Allocates a segment upstream and returns its single free block, in `own`'s index.
  block* new_segment(std::size_t segment_bytes, bool small, stream_pool* own) {
    auto seg = std::make_unique<segment>();
    void* base = upstream.allocate(segment_bytes, own->stream);
    seg->base = reinterpret_cast<std::uintptr_t>(base);
    seg->size = segment_bytes;
    seg->small = small;
    seg->order = next_segment_order++;
    block* b = detail::pool::first_block(blocks, seg.get(), own->stream);  // reserved by allocate()
    seg->next = segments;
    if (segments != nullptr) segments->prev = seg.get();
    segments = seg.release();
    counter.on_reserve(segment_bytes);
    own->index(small).insert(b);
    return b;
  }

  [[noreturn]] void throw_pool_oom(std::size_t bytes, const std::string& reason) {
    counter.on_oom();
    throw out_of_memory("pool_resource: out of memory allocating " + format_bytes(bytes) + " (" + reason + ")", bytes,
                        snapshot());
  }

  // ----- deallocate ---------------------------------------------------------------------------

  // The block joins the free list of the stream it is freed on (as in RMM, the caller orders any
  // other stream's use of it before that stream, or names such streams with record_stream).
  GPUMEM_POOL_INLINE void deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
    const std::size_t slot = live_slot(live, ptr);
    block* b = live.at(slot);
    if (b->requested != bytes) throw_size_mismatch(ptr, bytes, b->requested);
    stream_pool* target = pool_for(stream);  // may allocate: before any change
    if (!b->used_on.empty()) detail::pool::record_use_events(*ordering, b, stream);
    live.erase_at(slot);
    counter.on_deallocate(bytes);
    b->stream = stream;
    if (!b->events.empty() || b->quarantined) {
      b->state = block_state::pending;
      pending.push(b);
    } else {
      --b->seg->used_blocks;
      free_block(b, target);
    }
  }

  // Returns a block to `target`'s free index, merging it with its free neighbours. Merging only with
  // neighbours of the same stream lets the pieces of a large segment end up free on different
  // streams and never join again: large requests then keep growing the pool (reserved memory crept
  // to 16 GiB for a 1 GiB live set over 4 streams). So in a large segment a neighbour freed on
  // another stream merges too, and the merged block, free on `target`'s stream, keeps the other
  // streams in used_on (mixed): whichever stream takes it next first waits on an event recorded on
  // each of them (order_after_used_on), as when it borrows another stream's block. Nothing is
  // recorded here, so freeing stays free of driver calls; the waits are paid at reuse, by the stream
  // that reuses. Small segments keep the same-stream rule: any free piece serves a small request,
  // so they do not creep, and streams (or threads) that share a small segment keep reusing their
  // own blocks with no waits.
  GPUMEM_POOL_INLINE void free_block(block* b, stream_pool* target) noexcept {
    b->state = block_state::free;
    b->stream = target->stream;
    block* prev = b->prev_in_segment;
    block* next = b->next_in_segment;
    bool merge_prev = prev != nullptr && prev->state == block_state::free;
    bool merge_next = next != nullptr && next->state == block_state::free;
    const bool cross_prev = merge_prev && (prev->stream != b->stream || prev->mixed);
    const bool cross_next = merge_next && (next->stream != b->stream || next->mixed);
    if (cross_prev || cross_next) {
      if (!b->seg->small) {
        free_block_across_streams(b, target, merge_prev ? prev : nullptr, merge_next ? next : nullptr);
        return;
      }
      merge_prev = merge_prev && !cross_prev;
      merge_next = merge_next && !cross_next;
    }
    free_index& index = target->index(b->seg->small);
    if (merge_prev) {
      index.remove(prev);
      merge_into(blocks, prev, b);
      b = prev;
    }
    if (merge_next) {
      index.remove(next);
      merge_into(blocks, b, next);
    }
    index.insert(b);
  }

  // free_block's merge when a neighbour carries other streams: the merged block's used_on is the
  // union of the pieces' streams but its own. If that list cannot be grown (no memory), the block
  // is left unmerged rather than merged without its streams.
  GPUMEM_POOL_COLD void free_block_across_streams(block* b, stream_pool* target, block* prev, block* next) noexcept {
    block* survivor = prev != nullptr ? prev : b;
    std::vector<stream_handle>& merged = merge_scratch;  // survivor's own list is one of the inputs
    merged.clear();
    auto add = [&](stream_handle s) {
      if (s != target->stream && std::find(merged.begin(), merged.end(), s) == merged.end()) merged.push_back(s);
    };
    try {
      merged.reserve(streams.size());
      for (block* piece : {prev, b, next}) {
        if (piece == nullptr) continue;
        add(piece->stream);
        for (stream_handle s : piece->used_on) add(s);
      }
      survivor->used_on.reserve(merged.size());
    } catch (...) {
      target->index(b->seg->small).insert(b);
      return;
    }
    if (prev != nullptr) {
      prev->index->remove(prev);
      merge_into(blocks, prev, b);
    }
    if (next != nullptr) {
      next->index->remove(next);
      merge_into(blocks, survivor, next);
    }
    survivor->used_on.assign(merged.begin(), merged.end());  // within the reserved capacity
    survivor->mixed = !merged.empty();
    survivor->stream = target->stream;
    target->index(survivor->seg->small).insert(survivor);
  }

  // ----- pending blocks (record_stream) -------------------------------------------------------

  GPUMEM_POOL_COLD void process_pending() noexcept {
    pending.process(*ordering, [this](block* b) {
      --b->seg->used_blocks;
      free_block(b, find_pool(b->stream));  // exists: pruning keeps pending blocks' streams
    });
  }

  void synchronize_pending() noexcept {
    pending.synchronize(*ordering);
    process_pending();
  }

  // ----- segments -----------------------------------------------------------------------------

  // Gives free segments back until at most `keep` bytes are reserved; returns how many went.
  std::size_t release_free_segments(std::size_t keep) noexcept {
    std::size_t released = 0;
    for (segment* seg = segments; seg != nullptr && counter.get().reserved_bytes > keep;) {
      segment* next = seg->next;
      if (seg->used_blocks == 0 && release_segment(seg)) ++released;
      seg = next;
    }
    return released;
  }

  // Gives a segment whose blocks are all free back to the upstream, which frees in stream order on
  // the stream of the segment's first block; the other streams that freed its blocks (a block's own
  // and those in its used_on) are joined into that one by events first. Returns false (and keeps
  // the segment) on any failure.
  bool release_segment(segment* seg) noexcept {
    const stream_handle release_stream = seg->first->stream;
    try {
      for (block* b = seg->first; b != nullptr; b = b->next_in_segment) {
        if (b->stream != release_stream && !stream_seen_before(seg, b)) {
          order_after(*ordering, release_stream, b->stream);
        }
        if (b->mixed) order_after_used_on(*ordering, b, release_stream);
      }
      upstream.deallocate(reinterpret_cast<void*>(seg->base), seg->size, release_stream);
    } catch (...) {
      return false;
    }
    detail::pool::give_segment_blocks(blocks, seg);
    counter.on_release(seg->size);
    unlink_segment(seg);
    delete seg;
    return true;
  }

  static bool stream_seen_before(const segment* seg, const block* b) noexcept {
    for (const block* earlier = seg->first; earlier != b; earlier = earlier->next_in_segment) {
      if (earlier->stream == b->stream) return true;
    }
    return false;
  }

  void unlink_segment(segment* seg) noexcept {
    if (seg->prev != nullptr) {
      seg->prev->next = seg->next;
    } else {
      segments = seg->next;
    }
    if (seg->next != nullptr) seg->next->prev = seg->prev;
  }

  // The destructor's release: every segment, live blocks or not. Pending events are waited for
  // (record_stream's promise); no new events are recorded, as the streams may be gone by now.
  void release_everything() noexcept {
    pending.drain(*ordering);
    while (segments != nullptr) {
      segment* seg = segments;
      segments = seg->next;
      const stream_handle stream = seg->first->stream == retired_stream ? nullptr : seg->first->stream;
      try {
        upstream.deallocate(reinterpret_cast<void*>(seg->base), seg->size, stream);
      } catch (...) {
      }
      delete seg;  // block records go with block_store's chunks
    }
  }

  // ----- streams ------------------------------------------------------------------------------

  GPUMEM_POOL_INLINE stream_pool* find_pool(stream_handle stream) noexcept {
    if (last_pool != nullptr && last_pool->stream == stream) return last_pool;
    return search_pool(stream);
  }

  stream_pool* search_pool(stream_handle stream) noexcept {
    for (auto& p : streams) {
      if (p->stream == stream) return last_pool = p.get();
    }
    return nullptr;
  }

  GPUMEM_POOL_INLINE stream_pool* pool_for(stream_handle stream) {
    if (stream_pool* p = find_pool(stream)) return p;
    return add_pool(stream);
  }

  GPUMEM_POOL_COLD stream_pool* add_pool(stream_handle stream) {
    streams.push_back(std::make_unique<stream_pool>(stream));
    return last_pool = streams.back().get();
  }

  // Forgets streams with no free blocks and no pending ones (but the default stream), so that many
  // short-lived streams do not pile up.
  void prune_streams() noexcept {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < streams.size(); ++i) {
      if (streams[i].get() != default_pool && streams[i]->empty() && !pending.has_stream(streams[i]->stream)) {
        if (last_pool == streams[i].get()) last_pool = nullptr;
        streams[i].reset();
      } else {
        if (kept != i) streams[kept] = std::move(streams[i]);
        ++kept;
      }
    }
    streams.resize(kept);
  }

  // ----- a stream going away -----------------------------------------------------------------

  // `gone` has been synchronised and is about to be destroyed (see stream_observer): all work on
  // the memory freed on it, or that record_stream tied to it, has completed. So, without recording
  // anything on it: no list of streams to wait on names it any more; its free blocks move to the
  // default stream's free list (a stream that is never destroyed), merging there as any free does;
  // the pending blocks freed on it will join that list too; the live blocks allocated on it no
  // longer claim it; and its free list is forgotten, so that a new stream given the same handle
  // starts with none. O(blocks): streams are destroyed rarely, and the fast path pays nothing.
  GPUMEM_POOL_COLD void forget_stream(stream_handle gone) noexcept {
    if (gone == nullptr || gone == retired_stream) return;
    process_pending();
    stream_pool* const neutral = default_pool;
    for (segment* seg = segments; seg != nullptr; seg = seg->next) {
      for (block* b = seg->first; b != nullptr; b = b->next_in_segment) {
        detail::pool::forget_used_on(b, gone);
        if (b->stream == gone) b->stream = b->state == block_state::live ? retired_stream : neutral->stream;
      }
    }
    stream_pool* old = find_pool(gone);
    if (old == nullptr) return;
    for (bool small : {true, false}) {
      free_index& index = old->index(small);
      while (block* b = index.best_fit(granule)) rehome_free_block(b, neutral);
    }
    if (last_pool == old) last_pool = nullptr;
    streams.erase(std::find_if(streams.begin(), streams.end(), [old](const auto& p) { return p.get() == old; }));
  }

  // Moves free block `b` (already re-keyed to `target`'s stream) from the index it is in to
  // `target`'s, merging it with its free neighbours as free_block would: in a large segment with any
  // of them, the streams they wait on joining b's list; in a small one with those of target's stream.
  // The neighbours may still sit in the index being emptied, so each leaves its own index.
  GPUMEM_POOL_COLD void rehome_free_block(block* b, stream_pool* target) noexcept {
    b->index->remove(b);
    auto joins = [&](block* n) {
      return n != nullptr && n->state == block_state::free && (!b->seg->small || n->stream == target->stream);
    };
    block* prev = joins(b->prev_in_segment) ? b->prev_in_segment : nullptr;
    block* next = joins(b->next_in_segment) ? b->next_in_segment : nullptr;
    free_block_across_streams(b, target, prev, next);
  }

  void on_stream_destroyed(stream_handle stream) noexcept override {
    std::lock_guard<resource_lock> guard(lock);
    forget_stream(stream);
  }

  // ----- queries ------------------------------------------------------------------------------

  std::size_t largest_free_block() const noexcept {
    std::size_t largest = 0;
    for (const auto& p : streams) {
      largest = std::max({largest, p->small_blocks.largest(), p->large_blocks.largest()});
    }
    return largest;
  }

  resource_stats snapshot() const noexcept {
    resource_stats s = counter.get();
    s.largest_free_block = static_cast<std::int64_t>(largest_free_block());
    return s;
  }

  memory_resource& upstream;
  const pool_options options;
  const std::unique_ptr<stream_ordering> ordering;
  std::size_t small_limit = 0;
  std::size_t max_request = 0;

  resource_lock lock;
  stats_counter counter;
  live_table live;
  block_store blocks;
  std::vector<std::unique_ptr<stream_pool>> streams;
  std::vector<stream_handle> merge_scratch;  // free_block_across_streams's, kept for its capacity
  stream_pool* last_pool = nullptr;
  stream_pool* default_pool = nullptr;  // the nullptr stream's, never pruned
  segment* segments = nullptr;
  std::uint64_t next_segment_order = 0;
  pending_list pending;
};

pool_resource::pool_resource(memory_resource& upstream, pool_options options, std::unique_ptr<stream_ordering> ordering) {
  check_options(options);
  if (!ordering) ordering = make_ordering(upstream.kind(), upstream.device());
  impl_ = std::make_unique<impl>(upstream, options, std::move(ordering));
  add_stream_observer(*impl_);
}

pool_resource::~pool_resource() { remove_stream_observer(*impl_); }

memory_resource& pool_resource::upstream() const noexcept { return impl_->upstream; }

const pool_options& pool_resource::options() const noexcept { return impl_->options; }

std::size_t pool_resource::pending_free_blocks() const { return detail::pool::locked_pending_blocks(*impl_); }

void* pool_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  return detail::pool::locked_allocate(*impl_, bytes, stream);
}

void pool_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  detail::pool::locked_deallocate(*impl_, ptr, bytes, stream);
}

void pool_resource::do_record_stream(void* ptr, stream_handle stream) {
  detail::pool::locked_record_stream(*impl_, ptr, stream);
}

bool pool_resource::do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) {
  std::lock_guard<resource_lock> guard(impl_->lock);  // keeps the segment from being released meanwhile
  const block* b = impl_->live.at(live_slot(impl_->live, ptr));
  if (bytes > b->requested) throw_size_mismatch(ptr, bytes, b->requested);
  if (bytes == 0) return false;
  // The upstream knows only its own allocations (uvm_resource checks that ptr starts one), so
  // the range is given from the segment's start to the block's end: pages of the blocks before this
  // one may move too, which a prefetch, being a hint, allows.
  const std::size_t offset = b->addr - b->seg->base;
  return impl_->upstream.prefetch(reinterpret_cast<void*>(b->seg->base), offset + bytes, to, stream);
}

resource_stats pool_resource::do_stats() const { return detail::pool::locked_stats(*impl_); }

void pool_resource::do_reset_peak() { detail::pool::locked_reset_peak(*impl_); }

void pool_resource::do_trim(std::size_t bytes_to_keep) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->process_pending();
  impl_->release_free_segments(bytes_to_keep);
  impl_->prune_streams();
}

std::size_t pool_resource::do_allocation_size(const void* ptr) const {
  return detail::pool::locked_allocation_size(*impl_, ptr);
}

memory_kind pool_resource::do_kind() const noexcept { return impl_->upstream.kind(); }

int pool_resource::do_device() const noexcept { return impl_->upstream.device(); }

// 'pool': pool_resource over cudaMalloc, or over host memory (upstream 'host').
const strategy_descriptor& pool_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "pool";
    d.driver_needs = {{"cuMemAlloc", 3020}, {"cuEventRecord", 2000}};
    d.description =
        "caching block pool: 512 B rounding, best fit with split/coalesce, per-stream free lists (over cudaMalloc, or host "
        "memory without a GPU)";
    d.options_type = &typeid(pool_spec);
    d.layer = strategy_layer::cache;
    d.wraps = "cudaMalloc (upstream 'cuda') or plain host memory (upstream 'host')";
    d.flags.capturable = true;
    d.flags.peer_access = true;
    d.options = {choice_option<&pool_spec::upstream>("upstream", "where the pool's segments come from",
                                                     {{"cuda", placement::device}, {"host", placement::host}})
                     .placement().js_only().label("pool.upstream")};
    for (option_descriptor& o : pool_size_options<&pool_spec::options>("")) d.options.push_back(std::move(o));
    d.leaf_name = [](const chain_spec& spec) { return own(spec).upstream == placement::device ? "cuda" : "host"; };
    d.make_leaf = [](const chain_spec& spec, chain_build&) -> std::unique_ptr<memory_resource> {
      if (own(spec).upstream == placement::host) return std::make_unique<host_resource>();
      return std::make_unique<cuda_resource>(spec.device, spec.peer_access);
    };
    // the pool never touches its segments: it runs over addresses alone
    d.flags.address_only = true;
    d.make_address_only_leaf = [](const chain_spec&, chain_build&) { return make_address_only_resource(); };
    d.own_cap_bytes = [](const chain_spec& spec) -> std::uint64_t { return own(spec).options.max_reserved_bytes; };
    d.layer_name = [](const chain_spec&) -> const char* { return "pool"; };
    d.make_layer = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      return std::make_unique<pool_resource>(build.chain.top(), own(spec).options);
    };
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(own(spec).upstream == placement::host ? "'pool' over upstream 'host' holds host memory" : "");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
