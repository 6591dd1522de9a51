#include "gpumem/expandable_resource.hpp"

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

#include "pool_detail.hpp"
#include "sleep_engine.hpp"
#include "stream_ordered_blocks.hpp"
#include "vmm_runs.hpp"
#include "gpumem/address_only.hpp"
#include "gpumem/strategy_options.hpp"

namespace gpumem {

namespace {

// The options of strategy 'expandable' in a chain_spec (its descriptor's options_type).
const expandable_spec& own(const chain_spec& spec) { return spec.options<expandable_spec>(); }

using detail::pool::block;
using detail::pool::block_state;
using detail::pool::block_store;
using detail::pool::free_index;
using detail::pool::live_slot;
using detail::pool::live_table;
using detail::pool::merge_into;
using detail::pool::order_after_used_on;
using detail::pool::pending_list;
using detail::pool::resource_lock;
using detail::pool::round_up;
using detail::pool::segment;

// The owner of a destroyed stream's range: no stream handle equals it, so that a new stream given the
// old handle gets a range of its own.
char retired_stream_tag;
const stream_handle retired_stream = &retired_stream_tag;

// Consecutive granules mapped together, by one physical allocation (one cuMemCreate on a GPU).
// Such an allocation can only be unmapped whole, so a run is released only once every granule in
// it is idle: a run with one granule still in use keeps its idle granules mapped too.
struct mapped_run {
  std::size_t first = 0;        // granule
  std::size_t length = 0;       // granules
  std::size_t busy = 0;         // its granules that a live or parked block touches
  bool mapping = false;         // mapped by the map in progress: unmapped again if it fails
  std::uint32_t next_free = 0;  // while the slot is unused: the next unused slot + 1 (0: none)
};

// A range's mapped runs. Every granule names its run, so that taking or freeing a block whose
// granules are mapped finds its run with one load and updates one record per run it spans, however
// many granules it has; by_first orders the runs for the releases (highest first) and mapped_top.
class run_table {
 public:
  static constexpr std::uint32_t unmapped = 0;  // at() of a granule no run holds

  explicit run_table(std::size_t granules) : run_at_(granules, unmapped) {}

  // 1 + the slot of the run holding granule g, or unmapped.
  std::uint32_t at(std::size_t g) const noexcept { return run_at_[g]; }
  mapped_run& slot(std::uint32_t s) noexcept { return slots_[s]; }
  const mapped_run& slot(std::uint32_t s) const noexcept { return slots_[s]; }
  const std::map<std::size_t, std::uint32_t>& by_first() const noexcept { return by_first_; }
  bool empty() const noexcept { return by_first_.empty(); }

  // A record for the run [first, first + length), its granules not yet pointed at it (mark() does
  // that once they are mapped). May throw bad_alloc, and then changes nothing that matters.
  std::uint32_t add(std::size_t first, std::size_t length) {
    if (free_head_ == 0) {
      slots_.emplace_back();
      free_head_ = static_cast<std::uint32_t>(slots_.size());  // the new slot, unused
    }
    const std::uint32_t s = free_head_ - 1;
    by_first_.emplace(first, s);  // may throw: the slot stays unused
    free_head_ = slots_[s].next_free;
    slots_[s] = mapped_run{first, length, 0, false, 0};
    return s;
  }

  // Points the run's granules at it.
  void mark(std::uint32_t s) noexcept {
    const mapped_run& run = slots_[s];
    std::fill(run_at_.begin() + static_cast<std::ptrdiff_t>(run.first),
              run_at_.begin() + static_cast<std::ptrdiff_t>(run.first + run.length), s + 1);
  }

  // Forgets the run, marked or not: its granules are unmapped.
  void remove(std::uint32_t s) noexcept {
    mapped_run& run = slots_[s];
    for (std::size_t g = run.first; g < run.first + run.length; ++g) {
      if (run_at_[g] == s + 1) run_at_[g] = unmapped;
    }
    by_first_.erase(run.first);
    run.next_free = free_head_;
    free_head_ = s + 1;
  }

 private:
  std::vector<std::uint32_t> run_at_;  // per granule
  std::vector<mapped_run> slots_;
  std::uint32_t free_head_ = 0;                    // the first unused slot + 1 (0: none)
  std::map<std::size_t, std::uint32_t> by_first_;  // first granule -> slot
};

// One stream's virtual range for one tag. The segment part (base, size, first block, used_blocks)
// is what the pool's block records point to; the rest is per granule and per mapped run.
struct stream_range : segment {
  explicit stream_range(std::size_t granules) : edge_users(granules, 0), runs(granules) {}

  stream_handle owner = nullptr;  // retired_stream once the stream is destroyed
  tag_id tag = default_tag;       // the tag of every block in it
  // Its tag sleeps: the runs in `runs` are unmapped (their addresses kept for wake), none idle
  // unless cache_sleeps.
  bool asleep = false;
  // It sleeps with its cached memory (sleep_request::keep_cache): its idle runs were unmapped with the
  // others and wake maps them again, so a free while it sleeps forgets none.
  bool cache_sleeps = false;
  std::uint64_t allocated = 0;  // bytes asked for by its live blocks
  free_index free;              // the range's free blocks
  // Per granule: the live and parked blocks whose first or last granule it is. A granule strictly
  // inside a block is touched by that block alone (blocks do not overlap), so it needs no count: it
  // is in use while that block is. Taking or freeing a block changes two counts, not one per granule.
  std::vector<std::uint32_t> edge_users;
  run_table runs;              // every mapped granule is in exactly one run
  std::size_t idle_runs = 0;   // runs with busy == 0: what a release can unmap
  std::size_t mapped_top = 0;  // no granule at or past this index is mapped
  // Counts the changes to `free`: take_unmerged's last check that passed holds while it is unchanged.
  std::uint64_t free_version = 0;
  std::uint64_t fit_checked_version = ~std::uint64_t{0};
  std::size_t fit_checked_size = 0;
  const block* fit_checked_next = nullptr;
};

stream_range* range_of(const block* b) noexcept { return static_cast<stream_range*>(b->seg); }

// log2(n) for a power of two; no_shift otherwise (a device granule may be any multiple of the
// device's minimum), so that the usual granule index is a shift, not a division.
constexpr unsigned no_shift = ~0u;
unsigned shift_of(std::size_t n) noexcept {
  return n != 0 && (n & (n - 1)) == 0 ? static_cast<unsigned>(__builtin_ctzll(n)) : no_shift;
}

// What a release of idle granules aims at: it stops once reserved <= reserved_at_most and idle <= idle_at_most.
struct release_goal {
  std::uint64_t reserved_at_most;
  std::uint64_t idle_at_most;
};

[[noreturn]] void bad_option(const char* name, const std::string& expected, const std::string& received) {
  throw invalid_argument(invalid_argument::kind::range, name,
                         std::string("Expected ") + name + " to be " + expected + " but received " + received);
}

}  // namespace

struct expandable_resource::impl final : stream_observer {
  impl(std::unique_ptr<vmm> mem, const expandable_options& opts, std::unique_ptr<stream_ordering> order)
      : memory(std::make_unique<detail::vmm_runs>(std::move(mem))), options(opts), ordering(std::move(order)), granule(memory->granule_bytes()),
        granule_shift(shift_of(granule)), engine(memory->kind(), memory->device()) {
    engine.set_backup_limit(options.backup_limit_bytes);
    if (options.backup_reserve_bytes > 0) engine.reserve_ahead(options.backup_reserve_bytes, resource_stats{});
    if (options.gc_threshold > 0) {
      const double limit = std::floor(options.gc_threshold * static_cast<double>(options.capacity_bytes));
      gc_limit = static_cast<std::uint64_t>(limit);
    }
  }

  ~impl() {
    release_everything();
    for (const detail::tag_book::entry& e : book.entries()) engine.recycle(book.find(e.tag)->backup);
  }

  // ----- allocate -----------------------------------------------------------------------------

  GPUMEM_POOL_INLINE void* allocate(std::size_t bytes, stream_handle stream) {
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
  GPUMEM_POOL_INLINE void* finish_allocate(block* b, std::size_t bytes, std::size_t rounded, bool pinned) {
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

  // ----- the block freed last, not merged yet ----------------------------------------------------
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
  GPUMEM_POOL_INLINE block* take_unmerged(std::size_t rounded, stream_handle stream, tag_id tag) noexcept {
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

  // Merges `unmerged` (if any) with its free neighbour, as deallocate would have.
  GPUMEM_POOL_INLINE void merge_unmerged() noexcept {
    if (unmerged != nullptr) merge_unmerged_now();
  }

  GPUMEM_POOL_COLD void merge_unmerged_now() noexcept {
    block* b = unmerged;
    stream_range* r = range_of(b);
    unmerged = nullptr;
    if (unmerged_pinned) unpin(r, granule_index(r, b->addr), granule_index(r, b->addr + b->size - 1));
    free_block(b, r);
  }

  // Maps what block `b` (just taken for `bytes`, its granules [first, last] pinned) lacks. If that
  // fails, the block goes back among the free and out_of_memory (or the driver's error) is thrown.
  GPUMEM_POOL_COLD void map_block(block* b, stream_range* r, std::size_t bytes, std::size_t first, std::size_t last) {
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

  // The most granules a block of `size` bytes can touch.
  std::uint64_t granules_at_most(std::size_t size) const noexcept {
    return (granule_shift != no_shift ? size >> granule_shift : size / granule) + 2;
  }

  std::size_t granule_index(const stream_range* r, std::uintptr_t addr) const noexcept {
    const std::uintptr_t offset = addr - r->base;
    return granule_shift != no_shift ? offset >> granule_shift : offset / granule;  // a power of two but where asked
  }
  void* granule_addr(const stream_range* r, std::size_t g) const noexcept {
    return reinterpret_cast<void*>(r->base + g * granule);
  }

  // Maps the unmapped granules of [first, last]. When that fails: every parked block whose events can
  // be waited for is freed, every stream's idle granules are unmapped, and the map is tried once more.
  // Returns why it could not (empty: mapped); other errors (a driver failure) are thrown.
  std::string ensure_mapped(stream_range* r, std::size_t first, std::size_t last) {
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
  void map_granules(stream_range* r, std::size_t first, std::size_t last) {
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

  void unmap_run(stream_range* r, std::uint32_t s) noexcept {
    const mapped_run& run = r->runs.slot(s);
    memory->unmap_run(granule_addr(r, run.first), run.length * granule);
    idle_granules -= run.length - run.busy;
    if (run.busy == 0) --r->idle_runs;
    counter.on_release(static_cast<std::uint64_t>(run.length) * granule);
    r->runs.remove(s);
    largest_dirty = true;
  }

  static void update_mapped_top(stream_range* r) noexcept {
    const auto& by_first = r->runs.by_first();
    r->mapped_top = by_first.empty() ? 0 : by_first.rbegin()->first + r->runs.slot(by_first.rbegin()->second).length;
  }

  // A block taking granules [first, last] puts them in use: its first and last granule counted in
  // edge_users, the ones between in use with it. Returns whether all of them are mapped (those
  // that are not get no record until map_granules maps them, in use).
  GPUMEM_POOL_INLINE bool pin(stream_range* r, std::size_t first, std::size_t last) noexcept {
    const bool first_changes = r->edge_users[first]++ == 0;
    const bool last_changes = last != first && r->edge_users[last]++ == 0;
    return count_busy<+1>(r, first, last, first_changes, last_changes);
  }

  GPUMEM_POOL_INLINE void unpin(stream_range* r, std::size_t first, std::size_t last) noexcept {
    const bool first_changes = --r->edge_users[first] == 0;
    const bool last_changes = last != first && --r->edge_users[last] == 0;
    count_busy<-1>(r, first, last, first_changes, last_changes);
  }

  // Moves the mapped granules of [first, last] that change between idle and in use into (sign +1)
  // or out of (-1) their runs' busy counts: every granule but an edge one whose count stays above
  // zero (first_changes, last_changes false). One step per run the block spans, not per granule.
  // Returns whether all of [first, last] is mapped.
  template <int sign>
  GPUMEM_POOL_INLINE bool count_busy(stream_range* r, std::size_t first, std::size_t last, bool first_changes,
                                     bool last_changes) noexcept {
    const std::uint32_t at = r->runs.at(first);
    if (at != run_table::unmapped) {
      mapped_run& run = r->runs.slot(at - 1);
      if (last < run.first + run.length) {  // the block lies in one run: the usual case
        // Each edge whose count passed 0, and the granules between the edges.
        std::size_t changed = first_changes;
        if (last != first) changed += last - first - 1 + last_changes;
        add_busy<sign>(r, run, changed);
        return true;
      }
    }
    return count_busy_across_runs<sign>(r, first, last, first_changes, last_changes);
  }

  template <int sign>
  GPUMEM_POOL_COLD bool count_busy_across_runs(stream_range* r, std::size_t first, std::size_t last,
                                               bool first_changes, bool last_changes) noexcept {
    bool all_mapped = true;
    for (std::size_t g = first; g <= last;) {
      const std::uint32_t at = r->runs.at(g);
      if (at == run_table::unmapped) {
        all_mapped = false;
        ++g;
        continue;
      }
      mapped_run& run = r->runs.slot(at - 1);
      const std::size_t end = std::min(run.first + run.length - 1, last);
      std::size_t changed = end - g + 1;
      if (g == first && !first_changes) --changed;
      if (end == last && last != first && !last_changes) --changed;
      add_busy<sign>(r, run, changed);
      g = end + 1;
    }
    return all_mapped;
  }

  template <int sign>
  GPUMEM_POOL_INLINE void add_busy(stream_range* r, mapped_run& run, std::size_t granules) noexcept {
    if (granules == 0) return;
    // idle_granules counts mapped granules: a sleeping range's are not.
    if constexpr (sign > 0) {
      if (run.busy == 0) --r->idle_runs;
      run.busy += granules;
      if (!r->asleep) idle_granules -= granules;
    } else {
      run.busy -= granules;
      if (run.busy == 0) ++r->idle_runs;
      if (!r->asleep) idle_granules += granules;
    }
  }

  // Takes free block `b` out of the index for `rounded` bytes on `stream` (its range's owner, which
  // has waited on b's other streams). The rest, if any, is split off and stays free: with the waits
  // done, neither piece needs any more.
  GPUMEM_POOL_INLINE void take_block(block* b, std::size_t rounded, stream_handle stream) noexcept {
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

  GPUMEM_POOL_COLD [[noreturn]] void throw_larger_than_range(std::size_t bytes) {
    throw_oom(bytes, "the request is larger than the virtual range of a stream (reserveBytes " +
                         format_bytes(options.reserve_bytes) + ")");
  }

  GPUMEM_POOL_COLD [[noreturn]] void throw_range_full(std::size_t bytes, const stream_range* r) {
    throw_oom(bytes, "no free run of the stream's " + format_bytes(r->size) +
                         " virtual range is large enough (the blocks in use hold it)");
  }

  // Why a range reservation can fail with memory to spare: every stream and tag reserves a range of
  // address space, which a limit on the process's address space (RLIMIT_AS) counts in full.
  GPUMEM_POOL_COLD std::string address_space_hint() const {
    std::string hint = "; every stream and tag reserves reserveBytes (" + format_bytes_brief(options.reserve_bytes) +
                       ") of address space";
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      hint += ", and this process's address space is limited to " +
              format_bytes_brief(static_cast<std::uint64_t>(limit.rlim_cur)) + " (RLIMIT_AS: ulimit -v, prlimit --as)";
    }
    return hint + ": lower the option reserveBytes (reserve_bytes) to reserve less";
  }

  [[noreturn]] void throw_oom(std::size_t bytes, const std::string& reason) {
    merge_unmerged();  // the figures of the merged blocks
    counter.on_oom();
    throw out_of_memory("expandable_resource: out of memory allocating " + format_bytes(bytes) + " (" + reason + ")", bytes,
                        snapshot());
  }

  // ----- ranges -------------------------------------------------------------------------------

  stream_range* find_range(stream_handle stream, tag_id tag) noexcept {
    if (last_range != nullptr && last_range->owner == stream && last_range->tag == tag) return last_range;
    for (auto& r : ranges) {
      if (r->owner == stream && r->tag == tag) return last_range = r.get();
    }
    return nullptr;
  }

  // A range for `stream` and `tag`, which have none.
  GPUMEM_POOL_COLD stream_range* new_range(stream_handle stream, tag_id tag, std::size_t bytes) {
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

  // Waits on the host for the work that may still use the range's free memory: its owner's, and that
  // of the streams that freed blocks into it. Then no free block needs a wait any more. False (and
  // nothing unmapped by the caller) when an event cannot be recorded or waited for.
  bool quiesce(stream_range* r) noexcept {
    try {
      sync_scratch.clear();
      if (r->owner != retired_stream) sync_scratch.push_back(r->owner);
      for (block* b = r->first; b != nullptr; b = b->next_in_segment) {
        if (b->state != block_state::free) continue;
        for (stream_handle s : b->used_on) {
          if (std::find(sync_scratch.begin(), sync_scratch.end(), s) == sync_scratch.end()) sync_scratch.push_back(s);
        }
      }
      for (stream_handle s : sync_scratch) {
        event_handle event = ordering->record(s);
        try {
          ordering->synchronize(event);
        } catch (...) {
          ordering->release(event);
          throw;
        }
        ordering->release(event);
      }
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
  GPUMEM_POOL_COLD std::size_t release_idle(release_goal goal) noexcept {
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

  // A destroyed stream's range with no block in use: every run unmapped, the range freed.
  GPUMEM_POOL_COLD void release_range(stream_range* r) noexcept {
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

  void release_retired_ranges() noexcept {
    for (std::size_t i = ranges.size(); i-- > 0;) {
      if (ranges[i]->owner == retired_stream && ranges[i]->used_blocks == 0) release_range(ranges[i].get());
    }
  }

  // The destructor's release: every run and range, live blocks or not. Parked events are waited
  // for (record_stream's promise); the device is synchronised once, as the streams may be gone.
  void release_everything() noexcept {
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

  // ----- deallocate ---------------------------------------------------------------------------

  GPUMEM_POOL_INLINE void deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
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
  GPUMEM_POOL_INLINE void release_block(block* b, bool may_stay_unmerged = false) noexcept {
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
  GPUMEM_POOL_INLINE void free_block(block* b, stream_range* r) noexcept {
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

  // free_block's merge when a piece carries other streams: the merged block's used_on is the union
  // of the pieces'. If that list cannot be grown (no memory), the block is left unmerged rather than
  // merged without its streams.
  GPUMEM_POOL_COLD void free_block_mixed(block* b, stream_range* r, block* prev, block* next) noexcept {
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

  // ----- parked blocks (record_stream) ---------------------------------------------------------

  void process_pending() noexcept {
    merge_unmerged();
    pending.process(*ordering, [this](block* b) { release_block(b); });
  }

  void synchronize_pending() noexcept {
    pending.synchronize(*ordering);
    process_pending();
  }

  // ----- a stream going away -------------------------------------------------------------------

  // `gone` has been synchronised: no list of streams to wait on names it any more, its range serves
  // no new allocation (a new stream with the same handle gets its own), and the range goes as soon
  // as none of its blocks is in use.
  void forget_stream(stream_handle gone) noexcept {
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

  void on_stream_destroyed(stream_handle stream) noexcept override {
    std::lock_guard<resource_lock> guard(lock);
    forget_stream(stream);
  }

  // ----- sleep and wake (gpumem/sleep.hpp) ------------------------------------------------------
  //
  // A sleeping range keeps its run records (so that its blocks' granule counts stay right and wake
  // knows what to map), but nothing is mapped there: every run is unmapped, counted out of reserved
  // bytes and out of idle_granules, and none is idle (a run a free leaves idle is forgotten at once,
  // as its memory holds nothing to keep). No release policy looks at a sleeping range.

  // A freed block's saved content (its tag asleep, or awake with a retained backup) is not restored;
  // a retained backup left with nothing goes back to the pool.
  GPUMEM_POOL_COLD void forget_saved(tag_id tag, const block* b) noexcept {
    detail::tag_book::entry* e = book.find(tag);
    if (e == nullptr || e->backup.empty()) return;
    e->backup.forget(reinterpret_cast<void*>(b->addr), b->size);
    if (!e->asleep && e->backup.saved_bytes() == 0) {
      engine.recycle(e->backup);
      --retained_backups;
    }
  }

  // The backup a tag kept from its last wake (retain_backup), taken for its sleep now: its chunks hold
  // `bytes` (the same blocks are then laid out at the same host addresses), else back to the pool.
  detail::sleep_backup take_retained(tag_id tag, std::uint64_t bytes) noexcept {
    detail::tag_book::entry* e = book.find(tag);
    detail::sleep_backup kept;
    if (e == nullptr || e->backup.empty()) return kept;
    --retained_backups;
    if (bytes != 0 && e->backup.bytes() >= bytes) {
      kept = std::move(e->backup);
      e->backup = detail::sleep_backup{};
    } else {
      engine.recycle(e->backup);
    }
    return kept;
  }

  // Forgets run `s` of sleeping range `r` (already unmapped).
  void forget_asleep_run(stream_range* r, std::uint32_t s) noexcept {
    if (r->runs.slot(s).busy == 0) --r->idle_runs;
    r->runs.remove(s);
  }

  GPUMEM_POOL_COLD void forget_asleep_idle_runs(stream_range* r) noexcept {
    const auto& by_first = r->runs.by_first();
    for (auto it = by_first.begin(); it != by_first.end() && r->idle_runs != 0;) {
      const std::uint32_t s = it->second;
      ++it;  // forget_asleep_run erases the run's entry
      if (r->runs.slot(s).busy == 0) forget_asleep_run(r, s);
    }
    update_mapped_top(r);
  }

  template <class F>
  void for_each_range_of(tag_id tag, F&& f) {
    for (auto& owned : ranges) {
      if (owned->tag == tag) f(owned.get());
    }
  }

  // The runs of `r` as units (the physical mappings sleep releases and wake makes again).
  void add_units(const stream_range* r, std::vector<detail::sleep_unit>& units) const {
    for (const auto& [first, s] : r->runs.by_first()) {
      units.push_back({granule_addr(r, first), r->runs.slot(s).length * granule});
    }
  }

  static void sort_by_address(std::vector<detail::sleep_unit>& units) {
    std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.addr < b.addr; });
  }

  // Marks the ranges of `tag` asleep (their runs just unmapped) or awake (just mapped again): their
  // runs' idle granules leave or join idle_granules.
  void set_asleep(tag_id tag, bool asleep) noexcept {
    for_each_range_of(tag, [&](stream_range* r) {
      std::size_t idle = 0;
      for (const auto& [first, s] : r->runs.by_first()) idle += r->runs.slot(s).length - r->runs.slot(s).busy;
      if (asleep) {
        idle_granules -= idle;
      } else {
        idle_granules += idle;
      }
      r->asleep = asleep;
      if (!asleep) r->cache_sleeps = false;
    });
    largest_dirty = true;
  }

  sleep_report sleep(const sleep_request& request) {
    const auto start = std::chrono::steady_clock::now();
    sleep_report report;
    const auto plan = book.plan_sleep(request, report, "expandable");
    engine.begin_timing();
    if (!plan.empty()) sleep_tags(plan, request.keep_cache, report);
    report.timing = engine.end_timing();
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
  }

  void sleep_tags(const std::vector<std::pair<tag_id, sleep_mode>>& plan, bool keep_cache, sleep_report& report) {
    engine.quiesce();  // every copy and release comes after the work queued on the memory
    merge_unmerged();
    process_pending();  // parked blocks whose events are done (all of them, after the device sync)

    struct work {
      tag_id tag;
      sleep_mode mode;
      std::vector<detail::sleep_span> spans;  // the live blocks' requested bytes, by address
      std::uint64_t bytes = 0;
      detail::sleep_backup backup;
    };
    std::vector<work> works;
    works.reserve(plan.size());
    for (const auto& [tag, mode] : plan) {
      work w{tag, mode, {}, 0, {}};
      if (mode == sleep_mode::keep) {
        for_each_range_of(tag, [&](stream_range* r) {
          for (const block* b = r->first; b != nullptr; b = b->next_in_segment) {
            if (b->state != block_state::live || b->requested == 0) continue;
            w.spans.push_back({reinterpret_cast<void*>(b->addr), b->requested});
            w.bytes += b->requested;
          }
        });
        std::sort(w.spans.begin(), w.spans.end(), [](const auto& a, const auto& b) { return a.addr < b.addr; });
      }
      works.push_back(std::move(w));
    }
    // The host memory of every backup before anything is released: a host too short changes nothing.
    auto recycle_from = [&](std::size_t i) noexcept {
      for (; i < works.size(); ++i) engine.recycle(works[i].backup);
    };
    try {
      for (work& w : works) {
        w.backup = take_retained(w.tag, w.bytes);
        if (w.bytes != 0 && w.backup.empty()) w.backup = engine.reserve(w.bytes, snapshot());
      }
    } catch (...) {
      recycle_from(0);
      throw;
    }

    for (std::size_t i = 0; i < works.size(); ++i) {
      work& w = works[i];
      std::uint64_t released = 0;
      std::vector<detail::sleep_unit> units;
      try {
        // Idle runs hold nothing: unmapped for good, as a release would (with keep_cache, units as
        // the others, mapped again at wake).
        for_each_range_of(w.tag, [&](stream_range* r) {
          r->cache_sleeps = keep_cache;
          const auto& by_first = r->runs.by_first();
          for (auto it = by_first.begin(); it != by_first.end() && r->idle_runs != 0 && !keep_cache;) {
            const std::uint32_t s = it->second;
            ++it;  // unmap_run erases the run's entry
            if (r->runs.slot(s).busy != 0) continue;
            released += r->runs.slot(s).length * granule;
            unmap_run(r, s);
          }
          update_mapped_top(r);
          add_units(r, units);
        });
        sort_by_address(units);
      } catch (...) {
        recycle_from(i);
        throw;
      }
      // The runs in use: unmapped once their content is copied, their records kept for wake.
      std::size_t unmapped = 0;
      const auto release = [&](const detail::sleep_unit& u) {
        memory->unmap_run(u.addr, u.bytes);
        counter.on_release(u.bytes);
        released += u.bytes;
        ++unmapped;
      };
      try {
        engine.save_and_release(w.backup, w.spans, units, release, snapshot());
      } catch (...) {
        // Nothing was released (the host refused the backup's memory, or a copy could not be
        // queued), or everything was (a copy failed while running).
        if (unmapped != 0) put_to_sleep(w.tag, w.mode, released, std::move(w.backup), report);
        recycle_from(i);
        throw;
      }
      report.copied_bytes += w.bytes;
      put_to_sleep(w.tag, w.mode, released, std::move(w.backup), report);
    }
  }

  void put_to_sleep(tag_id tag, sleep_mode mode, std::uint64_t released, detail::sleep_backup&& backup,
                    sleep_report& report) noexcept {
    set_asleep(tag, true);
    detail::tag_book::entry* e = book.find(tag);
    e->asleep = true;
    e->mode = mode;
    e->slept_bytes = released;
    e->backup = std::move(backup);
    report.changed.push_back(tag);
    report.device_bytes += released;
  }

  sleep_report wake(const wake_request& request) {
    const auto start = std::chrono::steady_clock::now();
    sleep_report report;
    for (const tag_id tag : book.plan_wake(request.tags, report, "expandable")) wake_tag(tag, request.retain_backup, report);
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
  }

  void wake_tag(tag_id tag, bool retain, sleep_report& report) {
    detail::tag_book::entry* e = book.find(tag);
    std::vector<detail::sleep_unit> units;
    std::uint64_t needed = 0;
    for_each_range_of(tag, [&](stream_range* r) { add_units(r, units); });
    sort_by_address(units);
    for (const auto& u : units) needed += u.bytes;
    const std::uint64_t copied = e->backup.saved_bytes();
    std::uint64_t mapped = 0;
    const auto map = [&](const detail::sleep_unit& u) {
      memory->map_run(u.addr, u.bytes);
      counter.on_reserve(u.bytes);
      mapped += u.bytes;
    };
    const auto release = [&](const detail::sleep_unit& u) {
      memory->unmap_run(u.addr, u.bytes);
      counter.on_release(u.bytes);
      mapped -= u.bytes;
    };
    try {
      engine.map_and_restore(e->backup, units, map, release, retain);
    } catch (const out_of_memory& first) {
      // As an allocation would: the idle runs of the tags awake go, and the maps are tried once more.
      std::string failure = first.reason();
      synchronize_pending();
      bool woke = false;
      if (release_idle({0, 0}) > 0) {
        try {
          engine.map_and_restore(e->backup, units, map, release, retain);
          woke = true;
        } catch (const out_of_memory& again) {
          failure = again.reason();
        }
      }
      if (!woke) {
        counter.on_oom();
        throw out_of_memory("expandable_resource: out of memory waking tag '" + tag_name(tag) + "' (mapping " +
                                format_bytes(needed) + " failed after releasing every idle run: " + failure +
                                "); it stays asleep",
                            needed, snapshot());
      }
    }
    set_asleep(tag, false);
    e->asleep = false;
    e->slept_bytes = 0;
    if (retain && !e->backup.empty()) ++retained_backups;
    report.changed.push_back(tag);
    report.device_bytes += mapped;
    report.copied_bytes += copied;
  }

  // Throws invalid_state when [ptr, ptr + bytes) overlaps a range whose tag sleeps.
  void check_awake(const void* ptr, std::size_t bytes) const {
    const auto& tags = book.entries();
    if (std::none_of(tags.begin(), tags.end(), [](const auto& e) { return e.asleep; })) return;  // the usual case
    const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(ptr);
    const std::uintptr_t hi = lo + std::max<std::size_t>(bytes, 1);
    for (const auto& owned : ranges) {
      const stream_range* r = owned.get();
      if (!r->asleep || hi <= r->base || lo >= r->base + r->size) continue;
      throw invalid_state("expandable: the memory at " + format_pointer(ptr) + " belongs to tag '" + tag_name(r->tag) +
                          "', which is asleep: wake it before reading or writing it");
    }
  }

  std::vector<tag_state> tag_states() {
    std::vector<tag_state> states;
    states.reserve(book.entries().size());
    for (const detail::tag_book::entry& e : book.entries()) {
      tag_state t;
      t.tag = e.tag;
      t.asleep = e.asleep;
      t.mode = e.mode;
      t.slept_bytes = e.slept_bytes;
      t.backup_bytes = e.backup.bytes();
      for_each_range_of(e.tag, [&](stream_range* r) {
        t.allocated_bytes += r->allocated;
        if (r->asleep) return;
        for (const auto& [first, s] : r->runs.by_first()) t.device_bytes += r->runs.slot(s).length * granule;
      });
      states.push_back(t);
    }
    return states;
  }

  // ----- queries ------------------------------------------------------------------------------

  // The largest free run of mapped memory: what one allocation can take with no driver call.
  std::size_t largest_mapped_free_run() const noexcept {
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

  resource_stats snapshot() const noexcept {
    resource_stats s = counter.get();
    s.largest_free_block = static_cast<std::int64_t>(largest_mapped_free_run());
    return s;
  }

  std::unique_ptr<detail::vmm_runs> memory;
  const expandable_options options;
  const std::unique_ptr<stream_ordering> ordering;
  const std::size_t granule;
  const unsigned granule_shift;  // log2(granule), or no_shift where the granule is not a power of two
  const std::uint64_t idle_granules_kept = options.release_threshold / granule;
  std::uint64_t gc_limit = 0;  // 0: no garbage collection threshold

  resource_lock lock;
  detail::sleep_engine engine;
  std::size_t retained_backups = 0;  // awake tags holding a backup kept by wake's retain_backup
  detail::tag_book book;
  stats_counter counter;
  live_table live;
  block_store blocks;
  std::vector<std::unique_ptr<stream_range>> ranges;
  stream_range* last_range = nullptr;
  std::size_t idle_granules = 0;  // over every range
  pending_list pending;
  block* unmerged = nullptr;                 // the block deallocate freed last, if left unmerged
  bool unmerged_pinned = false;              // its granules still counted in use
  std::vector<stream_handle> merge_scratch;  // free_block's, kept for its capacity
  std::vector<stream_handle> sync_scratch;   // quiesce's
  mutable bool largest_dirty = true;
  mutable std::size_t largest_cached = 0;
};

namespace {

// Checks the options and fills in the defaults that depend on the memory.
expandable_options resolve(const expandable_options& given, const vmm& memory) {
  expandable_options o = given;
  const std::uint64_t granule = memory.granule_bytes();
  if (!(o.gc_threshold >= 0 && o.gc_threshold <= 1)) {
    bad_option("gcThreshold", "a fraction in (0, 1] (0: off)", std::to_string(o.gc_threshold));
  }
  if (o.reserve_bytes == 0) {
    const std::uint64_t total = memory.total_bytes();
    o.reserve_bytes = total == 0 ? expandable_resource::default_host_reserve : (total + granule - 1) / granule * granule;
  } else if (o.reserve_bytes % granule != 0) {
    bad_option("reserveBytes", "a positive multiple of the granule (" + std::to_string(granule) + ")",
               std::to_string(o.reserve_bytes));
  }
  if (o.reserve_bytes / granule > expandable_resource::max_granules_per_range) {
    bad_option("reserveBytes", "at most " + std::to_string(expandable_resource::max_granules_per_range) +
                                   " granules of " + std::to_string(granule) + " bytes",
               std::to_string(o.reserve_bytes));
  }
  if (o.capacity_bytes == 0) o.capacity_bytes = memory.total_bytes() != 0 ? memory.total_bytes() : o.reserve_bytes;
  return o;
}

}  // namespace

expandable_resource::expandable_resource(std::unique_ptr<vmm> memory, expandable_options options,
                                         std::unique_ptr<stream_ordering> ordering) {
  if (!memory) throw invalid_argument(invalid_argument::kind::type, "memory", "Expected a vmm but received none");
  const expandable_options resolved = resolve(options, *memory);
  if (!ordering) ordering = make_ordering(memory->kind(), memory->device());
  impl_ = std::make_unique<impl>(std::move(memory), resolved, std::move(ordering));
  add_stream_observer(*impl_);
}

expandable_resource::~expandable_resource() { remove_stream_observer(*impl_); }

const expandable_options& expandable_resource::options() const noexcept { return impl_->options; }

std::size_t expandable_resource::granule_bytes() const noexcept { return impl_->granule; }

std::uint64_t expandable_resource::idle_bytes() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->process_pending();
  return static_cast<std::uint64_t>(impl_->idle_granules) * impl_->granule;
}

std::size_t expandable_resource::range_count() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->ranges.size();
}

std::size_t expandable_resource::pending_free_blocks() const { return detail::pool::locked_pending_blocks(*impl_); }

void* expandable_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  return detail::pool::locked_allocate(*impl_, bytes, stream);
}

void expandable_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  detail::pool::locked_deallocate(*impl_, ptr, bytes, stream);
}

void expandable_resource::do_record_stream(void* ptr, stream_handle stream) {
  detail::pool::locked_record_stream(*impl_, ptr, stream);
}

bool expandable_resource::do_prefetch(void* ptr, std::size_t bytes, location, stream_handle) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  const block* b = impl_->live.at(live_slot(impl_->live, ptr));
  if (bytes > b->requested) throw_size_mismatch(ptr, bytes, b->requested);
  return false;  // device (or host) memory: there is nothing to move
}

resource_stats expandable_resource::do_stats() const { return detail::pool::locked_stats(*impl_); }

void expandable_resource::do_reset_peak() { detail::pool::locked_reset_peak(*impl_); }

void expandable_resource::do_trim(std::size_t bytes_to_keep) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->process_pending();
  impl_->release_retired_ranges();
  impl_->release_idle({bytes_to_keep, ~std::uint64_t{0}});
}

std::size_t expandable_resource::do_allocation_size(const void* ptr) const {
  return detail::pool::locked_allocation_size(*impl_, ptr);
}

memory_kind expandable_resource::do_kind() const noexcept { return impl_->memory->kind(); }

int expandable_resource::do_device() const noexcept { return impl_->memory->device(); }

sleep_report expandable_resource::do_sleep(const sleep_request& request) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->sleep(request);
}

sleep_report expandable_resource::do_wake(const wake_request& request) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->wake(request);
}

std::vector<tag_state> expandable_resource::do_tag_states() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->tag_states();
}

std::uint64_t expandable_resource::do_backup_pool_bytes() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->engine.pool_bytes();
}

void expandable_resource::do_trim_backup() {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->engine.trim();
}

bool expandable_resource::do_read_backup(const void* addr, std::size_t bytes, void* out) const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  for (const detail::tag_book::entry& e : impl_->book.entries()) {
    // An awake tag holds a backup only where its wake retained it.
    if ((!e.asleep || e.mode == sleep_mode::keep) && e.backup.read(addr, bytes, out)) return true;
  }
  return false;
}

const void* expandable_resource::do_backup_view(const void* addr, std::size_t bytes) const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  for (const detail::tag_book::entry& e : impl_->book.entries()) {
    if (e.asleep && e.mode != sleep_mode::keep) continue;
    if (const void* p = e.backup.view(addr, bytes)) return p;
  }
  return nullptr;
}

void expandable_resource::do_reserve_backup(std::uint64_t bytes) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->engine.reserve_ahead(bytes, impl_->snapshot());
}

void expandable_resource::do_check_awake(const void* ptr, std::size_t bytes) const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->check_awake(ptr, bytes);
}

namespace {

// Whether an expandable chain maps host memory (the host twin): asked for, or device -1.
bool on_host(const chain_spec& spec) { return own(spec).backing == expandable_backing::host || spec.device == -1; }

}  // namespace

// 'expandable': expandable_resource over physical memory (CUDA VMM, or the host twin).
const strategy_descriptor& expandable_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "expandable";
    d.description =
        "expandable segments: a virtual range per stream, physical memory mapped in granules as it grows (CUDA VMM, or "
        "mmap without a GPU)";
    d.options_type = &typeid(expandable_spec);
    d.layer = strategy_layer::cache;
    d.wraps = "physical granules: CUDA VMM on the device (vmm), or host mappings (mmap) with device -1";
    d.flags.peer_access = true;
    d.flags.host_device = true;
    d.flags.sleep = true;

    using O = expandable_options;
    constexpr std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    d.options = {
        choice_option<&expandable_spec::backing>("upstream", "where the granules come from: CUDA VMM, or host mappings (mmap)",
                                                 {{"cuda", expandable_backing::device}, {"host", expandable_backing::host}})
            .placement().js_only(),
        bytes_option<&expandable_spec::granule_bytes>("granuleBytes", "the mapping granule (unset: the backing's default)")
            .positive().unset_at(0).js_only()
            .doc("Bytes mapped at a time. cuda: a multiple of the device's minimum granularity (default: its recommended "
                 "granularity, 2 MiB on current GPUs); host: a power of two of at least the page size (default 2 MiB)."),
        bytes_option<&expandable_spec::options, &O::release_threshold>(
            "releaseThreshold", "idle mapped bytes kept; past it, idle granules are unmapped at free (unset: keep everything)")
            .unset_at(keep_all).js_only(),
        number_option<&expandable_spec::options, &O::gc_threshold>(
            "gcThreshold", "before mapping past this fraction of capacityBytes, idle granules are unmapped first (0: off)")
            .js_only()
            .doc("0 < f <= 1: before mapping past f x `capacityBytes`, idle granules are unmapped first (PyTorch's "
                 "garbage_collection_threshold). 0 (the default): off."),
        boolean_option<&expandable_spec::options, &O::unmap_idle_before_growth>(
            "unmapIdleBeforeGrowth",
            "before mapping past the peak of reserved bytes (since resetPeak), idle granules are unmapped first (the "
            "streams that used them synchronised on the host); false: they stay mapped until trim, releaseThreshold or "
            "gcThreshold")
            .env("GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH", "expandable.unmap_idle_before_growth")
            .doc("Before mapping past the peak of reserved bytes (since resetPeak()), every stream's idle granules are "
                 "unmapped first (waiting on the host for the streams that used them), so that a request that fits no free "
                 "block reuses the memory of the holes it does not fit instead of holding it beside new granules. false (the "
                 "default): idle granules stay mapped until trim(), `releaseThreshold` or `gcThreshold`. Each such release "
                 "waits for the streams, so it suits one stream whose shapes vary (on an H100 the transformer reserved 1.013x "
                 "its peak allocated with it, 1.08x without, at about the same epoch time) and not streams taking turns (two "
                 "streams unmapped 214 runs a pass: 55.7 µs an allocation against 4.4 µs; bench/RESULTS.md)."),
        bytes_option<&expandable_spec::options, &O::capacity_bytes>(
            "capacityBytes", "what gcThreshold is a fraction of (unset: limitBytes, else the device's memory)")
            .positive().unset_at(0).js_only(),
        bytes_option<&expandable_spec::options, &O::reserve_bytes>(
            "reserveBytes", "the virtual range reserved per stream (unset: the device's memory; the host twin: 64 GiB)")
            .positive().unset_at(0).js_only()
            .doc("The virtual range reserved per stream, a multiple of the granule; no allocation can be larger (default: "
                 "the device's memory rounded up to a granule; host: 64 GiB)."),
        bytes_option<&expandable_spec::options, &O::backup_limit_bytes>(
            "backupLimitBytes",
            "host bytes the backups of sleeping tags may hold (unset: MemAvailable less 10% of MemTotal at each sleep)")
            .js_only(),
        bytes_option<&expandable_spec::options, &O::backup_reserve_bytes>(
            "backupReserveBytes",
            "host bytes pinned for sleep's backups ahead of the first sleep, in the background (0: none)")
            .env("GPUMEM_SLEEP_RESERVE", "")  // no describe() label: config strings stay as they were
            .doc("Host bytes pinned for the backups of sleeping tags when the allocator is made, on background "
                 "threads (nothing waits for them), so that a first sleep copies at the host link's speed instead of "
                 "pinning as it copies; counted against `backupLimitBytes`. 0 (the default): none (`reserveBackup` "
                 "asks later)."),
    };
    d.leaf_name = [](const chain_spec& spec) { return on_host(spec) ? "mmap" : "vmm"; };
    d.make_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      build.physical = on_host(spec) ? make_host_vmm(own(spec).granule_bytes)
                                     : make_device_vmm(spec.device, {"expandable", "device 'host'", own(spec).granule_bytes,
                                                                     spec.peer_access, false});
      return nullptr;
    };
    // granules mapped into ranges, never read or written: address-only ranges will do, with the
    // granule the leaf would have (2 MiB on the device and the host alike) and the limit as the
    // device's memory (the default range per stream)
    d.flags.address_only = true;
    d.make_address_only_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      const std::size_t granule = own(spec).granule_bytes != 0 ? static_cast<std::size_t>(own(spec).granule_bytes) : std::size_t{2} << 20;
      build.physical = make_address_only_vmm(granule, spec.limit_bytes.value_or(0));
      return nullptr;
    };
    d.layer_name = [](const chain_spec&) -> const char* { return "expandable"; };
    d.make_layer = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      expandable_options o = own(spec).options;
      if (o.capacity_bytes == 0 && spec.limit_bytes) o.capacity_bytes = *spec.limit_bytes;  // the simulated device
      if (spec.address_only) {
        // A replay (the doctor, the out-of-memory report): no host memory pinned for backups, and no
        // range reserved past the simulated device.
        o.backup_reserve_bytes = 0;
        if (spec.limit_bytes && o.reserve_bytes > *spec.limit_bytes) o.reserve_bytes = 0;
      }
      auto r = std::make_unique<expandable_resource>(std::move(build.physical), o);
      if (!spec.address_only) build.chain.sleeper = r.get();  // nothing to back up from addresses alone
      return r;
    };
    d.validate = [](const chain_spec& spec) {
      const double f = own(spec).options.gc_threshold;
      if (!(f >= 0 && f <= 1)) {
        throw invalid_argument(invalid_argument::kind::range, "gcThreshold",
                               "Expected a fraction in (0, 1] (0: off) for gcThreshold but received " + std::to_string(f));
      }
    };
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(on_host(spec) ? "'expandable' over the host twin holds host memory" : "");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
