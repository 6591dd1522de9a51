// tiered_resource's implementation, shared by the files that hold its parts (a private header,
// internal to gpumem_core): a block's record, the cache of freed blocks by tier and size, and the
// impl with its members. Each part is one concern:
//   tiered_blocks.cpp    taking and freeing blocks: the cache, creating and releasing physical memory, statistics
//   tiered_moves.cpp     prefetch: moving blocks between tiers at the same address
//   tiered_sleep.cpp     sleep and wake by tag (gpumem/sleep.hpp)
//   tiered_resource.cpp  the public class, its options and the strategy's descriptor
#pragma once
#include "gpumem/tiered_resource.hpp"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#include "gpumem/device.hpp"
#include "gpumem/pinned_host_resource.hpp"  // read_host_memory_info, default_pinned_cap: the host cap
#include "gpumem/strategy_options.hpp"
#include "sleep_engine.hpp"
#include "stream_ordered_blocks.hpp"

namespace gpumem {
namespace detail::tiered {

// The options of strategy 'tiered' in a chain_spec (its descriptor's options_type).
inline const tiered_spec& own(const chain_spec& spec) { return spec.options<tiered_spec>(); }

constexpr std::size_t tiers = 2;
constexpr std::size_t index(placement t) noexcept { return static_cast<std::size_t>(t); }

// One block: a virtual range of its own, backed by one physical allocation on one tier.
struct block {
  std::uintptr_t base = 0;
  std::size_t size = 0;  // rounded to the granule: the range and the physical allocation
  placement tier = placement::device;
  vmm::handle handle = 0;
  std::size_t requested = 0;           // live: the bytes asked for
  stream_handle stream = nullptr;      // live: allocated on; cached: freed on
  bool stream_done = false;            // cached: the freeing stream is gone, its work complete
  bool quarantined = false;            // cached: an event could not be recorded; released, never reused
  std::vector<stream_handle> used_on;  // live: the streams record_stream named
  std::vector<event_handle> events;    // cached: recorded at free on those streams
  std::uint64_t age = 0;               // cached: the order of frees (released oldest first)
  tag_id tag = default_tag;            // the tag current at its allocation (cached: its last owner's)
  bool asleep = false;                 // live, device tier: its tag sleeps, nothing is mapped (handle 0)
};

// The cache, by (tier, size): one ordered map, so each tier's blocks are one key range and its
// largest block is the last of that range.
using cache_key = std::pair<std::size_t, std::size_t>;
using block_cache = std::multimap<cache_key, block>;

using detail::order_after;  // later work on a stream waits for what another queued so far

}  // namespace detail::tiered

using namespace detail::tiered;

struct tiered_resource::impl final : stream_observer {
  impl(std::unique_ptr<vmm> mem, const tiered_options& options, std::unique_ptr<stream_ordering> order)
      : memory(std::move(mem)),
        granule(memory->granule_bytes()),
        choice(options.placement),
        configured_placement(options.placement),
        engine(memory->kind(), memory->device()) {
    engine.set_backup_limit(options.backup_limit_bytes);
    if (options.backup_reserve_bytes > 0) engine.reserve_ahead(options.backup_reserve_bytes, resource_stats{});
    budget[index(placement::device)] =
        options.device_budget_bytes ? *options.device_budget_bytes : memory->default_device_budget();
    const std::optional<host_memory_info> host = read_host_memory_info();
    std::uint64_t& host_budget = budget[index(placement::host)];
    if (host) {
      host_budget = default_pinned_cap(*host);
      if (options.host_budget_bytes) host_budget = std::min(host_budget, *options.host_budget_bytes);
    } else if (options.host_budget_bytes) {
      host_budget = *options.host_budget_bytes;
    } else {
      throw invalid_state(
          "tiered: cannot read MemTotal and MemAvailable from /proc/meminfo to cap the pinned host tier; set "
          "hostBudgetBytes");
    }
    ordering = order ? std::move(order) : make_ordering(memory->kind(), std::max(memory->device(), 0));
    add_stream_observer(*this);
  }

  ~impl() {
    remove_stream_observer(*this);
    // Whatever still runs may use any block: wait for the device once, then give everything back.
    if (!live.empty() || !cache.empty()) memory->synchronize_device();
    for (auto& [key, b] : cache) {
      (void)key;
      for (event_handle e : b.events) ordering->release(e);
      give_back(b);
    }
    for (auto& [base, b] : live) {
      (void)base;
      give_back(b);
    }
    // The backups of tags still asleep go back to the engine before it frees its memory.
    for (const detail::tag_book::entry& e : book.entries()) {
      if (detail::tag_book::entry* held = book.find(e.tag)) engine.recycle(held->backup);
    }
  }

  // ----- allocate / deallocate ------------------------------------------------------------------
  void* allocate(std::size_t bytes, stream_handle stream);

  void deallocate(void* ptr, std::size_t bytes, stream_handle stream);

  void record_stream(void* ptr, stream_handle stream);

  block_cache::iterator find_cached(placement t, std::size_t size, stream_handle stream);

  block_cache::iterator find_cached_larger(placement t, std::size_t size);

  void* take_cached(block_cache::iterator it, std::size_t bytes, stream_handle stream, tag_id tag);

  void* create_block(placement t, std::size_t size, std::size_t bytes, stream_handle stream, tag_id tag,
                     std::string& why);

  bool make_room(placement t, std::uint64_t size, std::string& why);

  vmm::handle create_with_retry(placement t, std::size_t size);

  // ----- prefetch: moving blocks between tiers -----------------------------------------------------
  bool prefetch(void* ptr, std::size_t bytes, placement target, stream_handle stream);

  std::vector<block*> covering(void* ptr, std::size_t bytes);

  void move_block(block& b, vmm::handle fresh, placement target, void* temp, stream_handle stream);

  // ----- releasing cached blocks ----------------------------------------------------------------
  std::uint64_t release_cached(const placement* t, std::uint64_t at_least);

  void wait_idle(block& b) noexcept;

  void give_back(block& b) noexcept;

  // ----- sleep and wake by tag -----------------------------------------------------------------
  void free_sleeping(std::map<std::uintptr_t, block>::iterator it) noexcept;

  void put_to_sleep(block& b) noexcept;

  block& block_at(const void* addr) { return live.at(reinterpret_cast<std::uintptr_t>(addr)); }

  void check_awake(const void* ptr, std::size_t bytes) const;

  // Releases the cached device-tier blocks whose last owner's tag is one of `tags`. Returns the bytes.
  template <class Contains>
  std::uint64_t release_cached_of(const Contains& tags) {
    std::uint64_t released = 0;
    const std::size_t d = index(placement::device);
    for (auto it = cache.lower_bound(cache_key{d, 0}); it != cache.end() && it->first.first == d;) {
      block& b = it->second;
      if (!tags(b.tag)) {
        ++it;
        continue;
      }
      wait_idle(b);
      give_back(b);
      reserved[d] -= b.size;
      cached[d] -= b.size;
      counter.on_release(b.size);
      released += b.size;
      it = cache.erase(it);
    }
    return released;
  }

  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  sleep_report sleep(const sleep_request& request);

  void settle_asleep(detail::tag_book::entry& entry, sleep_mode mode, std::uint64_t slept,
                     detail::sleep_backup& backup);

  sleep_report wake(const wake_request& request);

  [[noreturn]] void throw_wake_oom(const std::vector<tag_id>& tags, std::uint64_t bytes, const std::string& why);

  std::vector<tag_state> tag_states() const;

  // ----- statistics ----------------------------------------------------------------------------
  void on_reserved(placement t, std::size_t size) noexcept;

  void on_allocated(placement t, std::size_t bytes) noexcept;

  resource_stats stats() const;

  [[noreturn]] void throw_oom(std::size_t bytes, const std::string& why);

  static void append(std::string& why, const std::string& reason);

  // ----- streams going away ---------------------------------------------------------------------
  void on_stream_destroyed(stream_handle gone) noexcept override;

  std::unique_ptr<vmm> memory;
  std::unique_ptr<stream_ordering> ordering;
  const std::size_t granule;
  std::uint64_t budget[tiers] = {0, 0};
  std::atomic<placement_choice> choice;  // where new blocks go (set_placement)
  const placement_choice configured_placement;

  mutable std::mutex mutex;
  std::map<std::uintptr_t, block> live;  // by base address
  block_cache cache;
  // Near the budget, a cached block up to this many times a request's size may serve it.
  static constexpr std::size_t larger_reuse = 4;
  std::uint64_t reserved[tiers] = {0, 0};  // physical bytes per tier, live and cached
  std::uint64_t cached[tiers] = {0, 0};    // the cached part
  std::uint64_t host_allocated = 0;
  std::uint64_t peak_host_allocated = 0;
  std::uint64_t peak_host_reserved = 0;
  std::uint64_t moved_to_host = 0;
  std::uint64_t moved_to_device = 0;
  std::uint64_t next_age = 0;
  stats_counter counter;
  detail::sleep_engine engine;  // the copies to host memory and back, and the host memory
  detail::tag_book book;        // the tags allocated in, which sleep and how
};

}  // namespace gpumem
