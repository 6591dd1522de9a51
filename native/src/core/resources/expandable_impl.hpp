// expandable_resource's implementation, shared by the files that hold its parts (a private header,
// internal to gpumem_core): the records of a stream's range (its mapped runs, its granules' users)
// and the impl with its members. Each part is one concern:
//   expandable_blocks.cpp   taking and freeing blocks: the free lists, the block left unmerged, parked blocks
//   expandable_mapping.cpp  mapping granules in runs and unmapping idle ones (the VMM primitive, vmm_runs.hpp)
//   expandable_ranges.cpp   the per-stream, per-tag virtual ranges: made, released, a stream going away
//   expandable_sleep.cpp    sleep and wake by tag (gpumem/sleep.hpp)
//   expandable_resource.cpp the public class, its options and the strategy's descriptor
#pragma once
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
namespace detail::expandable {

// The options of strategy 'expandable' in a chain_spec (its descriptor's options_type).
inline const expandable_spec& own(const chain_spec& spec) { return spec.options<expandable_spec>(); }

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
inline char retired_stream_tag;
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

inline stream_range* range_of(const block* b) noexcept { return static_cast<stream_range*>(b->seg); }

// log2(n) for a power of two; no_shift otherwise (a device granule may be any multiple of the
// device's minimum), so that the usual granule index is a shift, not a division.
constexpr unsigned no_shift = ~0u;
inline unsigned shift_of(std::size_t n) noexcept {
  return n != 0 && (n & (n - 1)) == 0 ? static_cast<unsigned>(__builtin_ctzll(n)) : no_shift;
}

// What a release of idle granules aims at: it stops once reserved <= reserved_at_most and idle <= idle_at_most.
struct release_goal {
  std::uint64_t reserved_at_most;
  std::uint64_t idle_at_most;
};

[[noreturn]] inline void bad_option(const char* name, const std::string& expected, const std::string& received) {
  throw invalid_argument(invalid_argument::kind::range, name,
                         std::string("Expected ") + name + " to be " + expected + " but received " + received);
}

}  // namespace detail::expandable

using namespace detail::expandable;

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
  GPUMEM_POOL_INLINE void* allocate(std::size_t bytes, stream_handle stream);

  GPUMEM_POOL_INLINE void* finish_allocate(block* b, std::size_t bytes, std::size_t rounded, bool pinned);

  // ----- the block freed last, not merged yet ----------------------------------------------------
  GPUMEM_POOL_INLINE block* take_unmerged(std::size_t rounded, stream_handle stream, tag_id tag) noexcept;

  // Merges `unmerged` (if any) with its free neighbour, as deallocate would have.
  GPUMEM_POOL_INLINE void merge_unmerged() noexcept {
    if (unmerged != nullptr) merge_unmerged_now();
  }

  GPUMEM_POOL_COLD void merge_unmerged_now() noexcept;

  GPUMEM_POOL_COLD void map_block(block* b, stream_range* r, std::size_t bytes, std::size_t first, std::size_t last);

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

  std::string ensure_mapped(stream_range* r, std::size_t first, std::size_t last);

  void map_granules(stream_range* r, std::size_t first, std::size_t last);

  void unmap_run(stream_range* r, std::uint32_t s) noexcept;

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

  GPUMEM_POOL_INLINE void take_block(block* b, std::size_t rounded, stream_handle stream) noexcept;

  GPUMEM_POOL_COLD [[noreturn]] void throw_larger_than_range(std::size_t bytes);

  GPUMEM_POOL_COLD [[noreturn]] void throw_range_full(std::size_t bytes, const stream_range* r);

  GPUMEM_POOL_COLD std::string address_space_hint() const;

  [[noreturn]] void throw_oom(std::size_t bytes, const std::string& reason);

  // ----- ranges -------------------------------------------------------------------------------
  stream_range* find_range(stream_handle stream, tag_id tag) noexcept;

  GPUMEM_POOL_COLD stream_range* new_range(stream_handle stream, tag_id tag, std::size_t bytes);

  bool quiesce(stream_range* r) noexcept;

  GPUMEM_POOL_COLD std::size_t release_idle(release_goal goal) noexcept;

  GPUMEM_POOL_COLD void release_range(stream_range* r) noexcept;

  void release_retired_ranges() noexcept;

  void release_everything() noexcept;

  // ----- deallocate ---------------------------------------------------------------------------
  GPUMEM_POOL_INLINE void deallocate(void* ptr, std::size_t bytes, stream_handle stream);

  GPUMEM_POOL_INLINE void release_block(block* b, bool may_stay_unmerged = false) noexcept;

  GPUMEM_POOL_INLINE void free_block(block* b, stream_range* r) noexcept;

  GPUMEM_POOL_COLD void free_block_mixed(block* b, stream_range* r, block* prev, block* next) noexcept;

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
  void forget_stream(stream_handle gone) noexcept;

  void on_stream_destroyed(stream_handle stream) noexcept override {
    std::lock_guard<resource_lock> guard(lock);
    forget_stream(stream);
  }

  // ----- sleep and wake (gpumem/sleep.hpp) ------------------------------------------------------
  GPUMEM_POOL_COLD void forget_saved(tag_id tag, const block* b) noexcept;

  detail::sleep_backup take_retained(tag_id tag, std::uint64_t bytes) noexcept;

  // Forgets run `s` of sleeping range `r` (already unmapped).
  void forget_asleep_run(stream_range* r, std::uint32_t s) noexcept {
    if (r->runs.slot(s).busy == 0) --r->idle_runs;
    r->runs.remove(s);
  }

  GPUMEM_POOL_COLD void forget_asleep_idle_runs(stream_range* r) noexcept;

  template <class F>
  void for_each_range_of(tag_id tag, F&& f) {
    for (auto& owned : ranges) {
      if (owned->tag == tag) f(owned.get());
    }
  }

  void add_units(const stream_range* r, std::vector<detail::sleep_unit>& units) const;

  static void sort_by_address(std::vector<detail::sleep_unit>& units) {
    std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.addr < b.addr; });
  }

  void set_asleep(tag_id tag, bool asleep) noexcept;

  sleep_report sleep(const sleep_request& request);

  void sleep_tags(const std::vector<std::pair<tag_id, sleep_mode>>& plan, bool keep_cache, sleep_report& report);

  void put_to_sleep(tag_id tag, sleep_mode mode, std::uint64_t released, detail::sleep_backup&& backup,
                    sleep_report& report) noexcept;

  sleep_report wake(const wake_request& request);

  void wake_tag(tag_id tag, bool retain, sleep_report& report);

  void check_awake(const void* ptr, std::size_t bytes) const;

  std::vector<tag_state> tag_states();

  // ----- queries ------------------------------------------------------------------------------
  std::size_t largest_mapped_free_run() const noexcept;

  resource_stats snapshot() const noexcept;

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

}  // namespace gpumem
