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

namespace gpumem {

namespace {

// The options of strategy 'tiered' in a chain_spec (its descriptor's options_type).
const tiered_spec& own(const chain_spec& spec) { return spec.options<tiered_spec>(); }

constexpr std::size_t tiers = 2;
constexpr std::size_t index(memory_tier t) noexcept { return static_cast<std::size_t>(t); }

// One block: a virtual range of its own, backed by one physical allocation on one tier.
struct block {
  std::uintptr_t base = 0;
  std::size_t size = 0;  // rounded to the granule: the range and the physical allocation
  memory_tier tier = memory_tier::device;
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

// Makes later work on `waiter` wait for everything queued on `source` so far.
void order_after(stream_ordering& ordering, stream_handle waiter, stream_handle source) {
  event_handle event = ordering.record(source);
  try {
    ordering.wait(waiter, event);
  } catch (...) {
    ordering.release(event);
    throw;
  }
  ordering.release(event);
}

}  // namespace

const char* tier_choice_name(tier_choice choice) noexcept {
  switch (choice) {
    case tier_choice::automatic: return "auto";
    case tier_choice::device: return "device";
    case tier_choice::host: return "host";
  }
  return "auto";
}

tier_choice parse_tier_choice(const char* name, const char* argument) {
  const std::string n = name == nullptr ? "" : name;
  if (n == "auto") return tier_choice::automatic;
  if (n == "device") return tier_choice::device;
  if (n == "host") return tier_choice::host;
  throw invalid_argument(invalid_argument::kind::type, argument,
                         std::string("Expected one of 'auto', 'device', 'host' for ") + argument + " but received '" + n +
                             "' of type string");
}

struct tiered_resource::impl final : stream_observer {
  impl(std::unique_ptr<vmm> mem, const tiered_options& options, std::unique_ptr<stream_ordering> order)
      : memory(std::move(mem)),
        granule(memory->granule_bytes()),
        placement(options.placement),
        configured_placement(options.placement),
        engine(memory->kind(), memory->device()) {
    engine.set_backup_limit(options.backup_limit_bytes);
    if (options.backup_reserve_bytes > 0) engine.reserve_ahead(options.backup_reserve_bytes, resource_stats{});
    budget[index(memory_tier::device)] =
        options.device_budget_bytes ? *options.device_budget_bytes : memory->default_device_budget();
    const std::optional<host_memory_info> host = read_host_memory_info();
    std::uint64_t& host_budget = budget[index(memory_tier::host)];
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

  void* allocate(std::size_t bytes, stream_handle stream) {
    std::lock_guard<std::mutex> lock(mutex);
    const tag_id tag = current_tag();
    book.on_allocate(tag);  // throws invalid_state while the tag sleeps, before anything is done
    const tier_choice choice = placement.load(std::memory_order_relaxed);
    if (bytes > std::numeric_limits<std::size_t>::max() - granule) {
      throw_oom(bytes, "the request is larger than any block can be");
    }
    const std::size_t size = (bytes + granule - 1) / granule * granule;
    std::string why;
    for (memory_tier t : {memory_tier::device, memory_tier::host}) {
      if ((t == memory_tier::device && choice == tier_choice::host) ||
          (t == memory_tier::host && choice == tier_choice::device)) {
        continue;
      }
      const auto cached_block = find_cached(t, size, stream);
      if (cached_block != cache.end()) return take_cached(cached_block, bytes, stream, tag);
      // Where a new block would need cached blocks released to fit the budget, a cached block up
      // to `larger_reuse` times the size serves instead (what a pool's split would give): no
      // driver calls, and no release of memory that the next request of that size wants back.
      if (reserved[index(t)] + size > budget[index(t)]) {
        const auto larger = find_cached_larger(t, size);
        if (larger != cache.end()) return take_cached(larger, bytes, stream, tag);
      }
      if (void* p = create_block(t, size, bytes, stream, tag, why)) return p;
    }
    if (choice != tier_choice::automatic) {
      why += std::string(why.empty() ? "" : "; ") + "placement '" + tier_choice_name(choice) +
             "' allows that tier only";
    }
    throw_oom(bytes, why);
  }

  void deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == live.end()) throw_unknown_pointer(ptr);
    block& b = it->second;
    if (b.requested != bytes) throw_size_mismatch(ptr, bytes, b.requested);
    if (b.asleep) {
      free_sleeping(it);
      return;
    }
    const std::size_t requested = b.requested;
    // Events on the streams record_stream named (not the freeing one, which orders its own reuse),
    // so that whoever takes the block next waits for them. An event that cannot be recorded
    // quarantines the block: it is never reused, and released after the device has finished.
    std::vector<event_handle> events;
    bool quarantined = false;
    try {
      events.reserve(b.used_on.size());
      for (stream_handle s : b.used_on) {
        if (s == stream) continue;
        event_handle e = ordering->record(s);
        if (e != nullptr) events.push_back(e);
      }
    } catch (...) {
      for (event_handle e : events) ordering->release(e);
      events.clear();
      quarantined = true;
    }
    block freed = std::move(b);
    freed.requested = 0;
    freed.stream = stream;
    freed.stream_done = false;
    freed.quarantined = quarantined;
    freed.used_on.clear();
    freed.events = std::move(events);
    freed.age = next_age++;
    const memory_tier t = freed.tier;
    const std::size_t size = freed.size;
    live.erase(it);
    try {
      cache.emplace(cache_key{index(t), size}, std::move(freed));
      cached[index(t)] += size;
    } catch (...) {
      // No room to cache it (bad_alloc): give it back now, after its work.
      wait_idle(freed);
      give_back(freed);
      reserved[index(t)] -= size;
      counter.on_release(size);
    }
    counter.on_deallocate(requested);
    if (t == memory_tier::host) host_allocated -= requested;
  }

  void record_stream(void* ptr, stream_handle stream) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == live.end()) throw_unknown_pointer(ptr);
    block& b = it->second;
    if (stream == b.stream || std::find(b.used_on.begin(), b.used_on.end(), stream) != b.used_on.end()) return;
    b.used_on.push_back(stream);
  }

  // A cached block of `size` on tier `t` for `stream`: one freed on `stream` (or whose stream is
  // gone) first, else the oldest freed on another stream; end() when there is none.
  block_cache::iterator find_cached(memory_tier t, std::size_t size, stream_handle stream) {
    auto [first, last] = cache.equal_range(cache_key{index(t), size});
    block_cache::iterator other = cache.end();
    for (auto it = first; it != last; ++it) {
      const block& b = it->second;
      if (b.quarantined) continue;
      if (b.stream == stream || b.stream_done) return it;
      if (other == cache.end()) other = it;
    }
    return other;
  }

  // The smallest usable cached block on tier `t` larger than `size` and at most larger_reuse
  // times it; end() when there is none.
  block_cache::iterator find_cached_larger(memory_tier t, std::size_t size) {
    const std::size_t most = size > std::numeric_limits<std::size_t>::max() / larger_reuse ? size : size * larger_reuse;
    for (auto it = cache.upper_bound(cache_key{index(t), size}); it != cache.end(); ++it) {
      if (it->first.first != index(t) || it->first.second > most) break;
      if (!it->second.quarantined) return it;
    }
    return cache.end();
  }

  void* take_cached(block_cache::iterator it, std::size_t bytes, stream_handle stream, tag_id tag) {
    block& b = it->second;
    // Stream order: work queued on the freeing stream (and on the streams record_stream named) may
    // still use the block; `stream` waits for it on the device, not the host.
    if (!b.stream_done && b.stream != stream) order_after(*ordering, stream, b.stream);
    for (event_handle e : b.events) ordering->wait(stream, e);
    for (event_handle e : b.events) ordering->release(e);
    b.events.clear();
    auto [slot, inserted] = live.emplace(b.base, block{});
    (void)inserted;
    block& taken = slot->second;
    taken = std::move(b);
    cache.erase(it);
    taken.requested = bytes;
    taken.stream = stream;
    taken.stream_done = false;
    taken.tag = tag;
    cached[index(taken.tier)] -= taken.size;
    on_allocated(taken.tier, bytes);
    return reinterpret_cast<void*>(taken.base);
  }

  // A new block on tier `t`, or nullptr (with why appended) when its budget or the driver refuses
  // even after the tier's cached blocks are released. Other failures throw, leaving nothing behind.
  void* create_block(memory_tier t, std::size_t size, std::size_t bytes, stream_handle stream, tag_id tag,
                     std::string& why) {
    if (!make_room(t, size, why)) return nullptr;
    vmm::handle h = 0;
    try {
      h = create_with_retry(t, size);
    } catch (const out_of_memory& e) {
      append(why, e.reason());
      return nullptr;
    }
    void* base = nullptr;
    try {
      base = memory->reserve(size);
      try {
        memory->map(base, size, h, t);
      } catch (...) {
        memory->free_range(base, size);
        throw;
      }
    } catch (const out_of_memory& e) {
      memory->release(h);
      append(why, e.reason());
      return nullptr;
    } catch (...) {
      memory->release(h);
      throw;
    }
    const auto key = reinterpret_cast<std::uintptr_t>(base);
    try {
      block& b = live.emplace(key, block{}).first->second;
      b.base = key;
      b.size = size;
      b.tier = t;
      b.handle = h;
      b.requested = bytes;
      b.stream = stream;
      b.tag = tag;
    } catch (...) {
      memory->unmap(base, size);
      memory->free_range(base, size);
      memory->release(h);
      throw;
    }
    on_reserved(t, size);
    on_allocated(t, bytes);
    return base;
  }

  // Whether tier `t` can take `size` more bytes within its budget, releasing its cached blocks
  // (oldest first) as far as that needs; false (with why appended, nothing released) when the
  // blocks in use leave no room.
  bool make_room(memory_tier t, std::uint64_t size, std::string& why) {
    const std::size_t i = index(t);
    const std::uint64_t in_use = reserved[i] - cached[i];
    if (size > budget[i] || in_use > budget[i] - size) {
      append(why, std::string("the ") + tier_name(t) + " budget of " + format_bytes_brief(budget[i]) + " has " +
                      format_bytes_brief(budget[i] > in_use ? budget[i] - in_use : 0) + " left beside the blocks in use");
      return false;
    }
    if (reserved[i] + size > budget[i]) release_cached(&t, reserved[i] + size - budget[i]);
    return true;
  }

  // One physical allocation on tier `t`; when the driver refuses, every cached block of that tier
  // is released and the call tried once more. Throws out_of_memory when it still fails.
  vmm::handle create_with_retry(memory_tier t, std::size_t size) {
    try {
      return memory->create(size, t);
    } catch (const out_of_memory&) {
      if (release_cached(&t, std::numeric_limits<std::uint64_t>::max()) == 0) throw;
    }
    return memory->create(size, t);
  }

  // ----- prefetch: moving blocks between tiers -----------------------------------------------------

  bool prefetch(void* ptr, std::size_t bytes, location to, stream_handle stream) {
    std::lock_guard<std::mutex> lock(mutex);
    const memory_tier target = to == location::device ? memory_tier::device : memory_tier::host;
    std::vector<block*> movers;
    std::uint64_t need = 0;
    const std::vector<block*> blocks = covering(ptr, bytes);
    for (const block* b : blocks) {
      if (book.asleep(b->tag)) {
        throw invalid_state("tiered: tag '" + tag_name(b->tag) + "' is asleep: wake it before prefetching its blocks");
      }
    }
    for (block* b : blocks) {
      if (b->tier == target) continue;
      movers.push_back(b);
      need += b->size;
    }
    if (movers.empty()) return true;
    std::string why;
    if (!make_room(target, need, why)) return false;
    // Every target allocation first, so that a refusal changes no block.
    std::vector<vmm::handle> fresh;
    fresh.reserve(movers.size());
    std::size_t largest = 0;
    void* temp = nullptr;
    try {
      for (block* b : movers) {
        fresh.push_back(create_with_retry(target, b->size));
        largest = std::max(largest, b->size);
      }
      temp = memory->reserve(largest);
    } catch (const out_of_memory&) {
      for (vmm::handle h : fresh) memory->release(h);
      return false;
    } catch (...) {
      for (vmm::handle h : fresh) memory->release(h);
      throw;
    }
    for (block* b : movers) on_reserved(target, b->size);
    std::size_t i = 0;
    try {
      for (; i < movers.size(); ++i) move_block(*movers[i], fresh[i], target, temp, stream);
    } catch (...) {
      for (std::size_t j = i; j < movers.size(); ++j) {  // not taken by a block
        memory->release(fresh[j]);
        reserved[index(target)] -= movers[j]->size;
        counter.on_release(movers[j]->size);
      }
      memory->free_range(temp, largest);
      throw;
    }
    memory->free_range(temp, largest);
    return true;
  }

  // The live blocks [ptr, ptr + bytes) lies in (bytes 0: the one ptr is in). Throws
  // invalid_argument for a pointer in no live block (type) or a range that leaves them (range).
  std::vector<block*> covering(void* ptr, std::size_t bytes) {
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = live.upper_bound(p);
    if (it == live.begin()) throw_unknown_pointer(ptr);
    --it;
    if (p - it->first >= it->second.size) throw_unknown_pointer(ptr);
    const std::uintptr_t end = bytes > std::numeric_limits<std::uintptr_t>::max() - p ? 0 : p + std::max<std::size_t>(bytes, 1);
    std::vector<block*> out;
    for (;;) {
      out.push_back(&it->second);
      const std::uintptr_t block_end = it->first + it->second.size;
      if (end != 0 && end <= block_end) return out;
      ++it;
      if (end == 0 || it == live.end() || it->first != block_end) {
        throw invalid_argument(invalid_argument::kind::range, "bytes",
                               "Expected [ptr, ptr + bytes) to lie in live allocations but " + format_pointer(ptr) +
                                   " + " + std::to_string(bytes) + " runs past the allocation at " +
                                   format_pointer(reinterpret_cast<void*>(out.back()->base)));
      }
    }
  }

  // Moves block `b` to `target`'s physical allocation `fresh`, at the same address: map `fresh` at
  // `temp`, copy on `stream` after the streams `b` was used on, wait, then swap the mappings at b's
  // address. On a throw `b` is as it was and `fresh` is not taken.
  void move_block(block& b, vmm::handle fresh, memory_tier target, void* temp, stream_handle stream) {
    void* base = reinterpret_cast<void*>(b.base);
    memory->map(temp, b.size, fresh, target);
    try {
      if (b.stream != stream) order_after(*ordering, stream, b.stream);
      for (stream_handle s : b.used_on) {
        if (s != stream) order_after(*ordering, stream, s);
      }
      memory->copy(temp, base, b.requested, stream);
      memory->synchronize(stream);
    } catch (...) {
      memory->unmap(temp, b.size);
      throw;
    }
    memory->unmap(temp, b.size);
    memory->unmap(base, b.size);
    try {
      memory->map(base, b.size, fresh, target);
    } catch (...) {
      try {
        memory->map(base, b.size, b.handle, b.tier);  // put the old memory back
      } catch (...) {
      }
      throw;
    }
    memory->release(b.handle);
    reserved[index(b.tier)] -= b.size;
    counter.on_release(b.size);
    if (target == memory_tier::host) {
      host_allocated += b.requested;
      peak_host_allocated = std::max(peak_host_allocated, host_allocated);
      moved_to_host += b.requested;
    } else {
      host_allocated -= b.requested;
      moved_to_device += b.requested;
    }
    b.tier = target;
    b.handle = fresh;
  }

  // ----- releasing cached blocks ----------------------------------------------------------------

  // Releases cached blocks (of tier *t, or of both when t is null), oldest first, until at least
  // `at_least` bytes are released or none is left. Returns the bytes released.
  std::uint64_t release_cached(const memory_tier* t, std::uint64_t at_least) {
    std::vector<block_cache::iterator> candidates;
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (t == nullptr || it->first.first == index(*t)) candidates.push_back(it);
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const block_cache::iterator& a, const block_cache::iterator& b) { return a->second.age < b->second.age; });
    std::uint64_t released = 0;
    for (auto it : candidates) {
      if (released >= at_least) break;
      block& b = it->second;
      wait_idle(b);
      give_back(b);
      reserved[index(b.tier)] -= b.size;
      cached[index(b.tier)] -= b.size;
      counter.on_release(b.size);
      released += b.size;
      cache.erase(it);
    }
    return released;
  }

  // Waits on the host until no work queued before the block was freed can still use it.
  void wait_idle(block& b) noexcept {
    bool waited = !b.quarantined;
    try {
      if (waited && !b.stream_done) {
        event_handle e = ordering->record(b.stream);
        try {
          ordering->synchronize(e);
        } catch (...) {
          ordering->release(e);
          throw;
        }
        ordering->release(e);
      }
      for (event_handle e : b.events) ordering->synchronize(e);
    } catch (...) {
      waited = false;
    }
    for (event_handle e : b.events) ordering->release(e);
    b.events.clear();
    if (!waited) memory->synchronize_device();
  }

  // Unmaps and releases the block's memory (a sleeping block has none) and frees its range. Never
  // throws.
  void give_back(block& b) noexcept {
    void* base = reinterpret_cast<void*>(b.base);
    if (!b.asleep) {
      memory->unmap(base, b.size);
      memory->release(b.handle);
    }
    memory->free_range(base, b.size);
  }

  // ----- sleep and wake by tag -----------------------------------------------------------------

  // A free of a sleeping block: nothing is mapped, so its range is freed as it is, and its saved
  // copy is dropped; its physical bytes were counted as released when it slept.
  void free_sleeping(std::map<std::uintptr_t, block>::iterator it) noexcept {
    block& b = it->second;
    if (detail::tag_book::entry* e = book.find(b.tag)) {
      e->backup.forget(reinterpret_cast<const void*>(b.base), b.requested);
      e->slept_bytes -= std::min<std::uint64_t>(e->slept_bytes, b.size);
    }
    counter.on_deallocate(b.requested);
    memory->free_range(reinterpret_cast<void*>(b.base), b.size);
    live.erase(it);
  }

  // Gives back block `b` of the device tier that sleep or a failed wake releases: unmapped, its
  // memory released, its range kept.
  void put_to_sleep(block& b) noexcept {
    memory->unmap(reinterpret_cast<void*>(b.base), b.size);
    memory->release(b.handle);
    b.handle = 0;
    b.asleep = true;
    reserved[index(memory_tier::device)] -= b.size;
    counter.on_release(b.size);
  }

  block& block_at(const void* addr) { return live.at(reinterpret_cast<std::uintptr_t>(addr)); }

  // Throws invalid_state when [ptr, ptr + bytes) overlaps a live block whose tag sleeps.
  void check_awake(const void* ptr, std::size_t bytes) const {
    const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(ptr);
    const std::uintptr_t hi = lo + std::max<std::size_t>(bytes, 1);
    auto it = live.upper_bound(lo);
    if (it != live.begin()) --it;
    for (; it != live.end() && it->first < hi; ++it) {
      const block& b = it->second;
      if (!b.asleep || it->first + b.size <= lo) continue;
      throw invalid_state("tiered: the memory at " + format_pointer(ptr) + " belongs to tag '" + tag_name(b.tag) +
                          "', which is asleep: wake it before reading or writing it");
    }
  }

  // Releases the cached device-tier blocks whose last owner's tag is one of `tags`. Returns the bytes.
  template <class Contains>
  std::uint64_t release_cached_of(const Contains& tags) {
    std::uint64_t released = 0;
    const std::size_t d = index(memory_tier::device);
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

  sleep_report sleep(const sleep_request& request) {
    const auto start = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    sleep_report report;
    if (request.keep_cache) {
      throw invalid_argument(invalid_argument::kind::range, "keep_cache",
                             "tiered: keep_cache is not offered (its cached device blocks are released at sleep and not "
                             "mapped again); 'expandable' offers it");
    }
    const std::vector<std::pair<tag_id, sleep_mode>> plan = book.plan_sleep(request, report, "tiered");
    engine.begin_timing();
    // Per tag: the live device-tier blocks (the units, by address) and, where it keeps, their bytes.
    struct tag_work {
      tag_id tag = default_tag;
      sleep_mode mode = sleep_mode::keep;
      std::vector<detail::sleep_unit> units;
      std::vector<detail::sleep_span> spans;
      std::uint64_t span_bytes = 0;
      detail::sleep_backup backup;
    };
    std::vector<tag_work> work(plan.size());
    std::unordered_map<tag_id, std::size_t> slot;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      work[i].tag = plan[i].first;
      work[i].mode = plan[i].second;
      slot.emplace(plan[i].first, i);
    }
    for (auto& [base, b] : live) {
      if (b.tier != memory_tier::device || b.asleep) continue;
      const auto s = slot.find(b.tag);
      if (s == slot.end()) continue;
      tag_work& w = work[s->second];
      void* addr = reinterpret_cast<void*>(base);
      w.units.push_back({addr, b.size});
      if (w.mode == sleep_mode::keep) {
        w.spans.push_back({addr, b.requested});
        w.span_bytes += b.requested;
      }
    }
    // Host memory for every backup first: when the host is short, nothing has been released.
    try {
      for (tag_work& w : work) {
        if (w.span_bytes > 0) w.backup = engine.reserve(w.span_bytes, stats());
      }
    } catch (...) {
      for (tag_work& w : work) engine.recycle(w.backup);
      throw;
    }
    if (work.empty()) {
      report.timing = engine.end_timing();
      report.seconds = seconds_since(start);
      return report;
    }
    engine.quiesce();
    for (std::size_t i = 0; i < work.size(); ++i) {
      tag_work& w = work[i];
      detail::tag_book::entry* entry = book.find(w.tag);
      std::uint64_t slept = 0;
      try {
        if (!w.units.empty()) {
          engine.save_and_release(
              w.backup, w.spans, w.units,
              [&](const detail::sleep_unit& u) {
                block& b = block_at(u.addr);
                put_to_sleep(b);
                slept += b.size;
              },
              stats());
        }
      } catch (...) {
        // Nothing released (a copy that could not be queued, or pinned memory the host refused past
        // what reserve() granted): the tag stays awake, its cached blocks too. Units released (a
        // copy that failed while running): it sleeps, the content of the failed copies lost, never
        // the addresses. The tags before it sleep; those after it stay awake.
        if (slept > 0) {
          const std::uint64_t cached = release_cached_of([&w](tag_id t) { return t == w.tag; });
          settle_asleep(*entry, w.mode, slept + cached, w.backup);
        } else {
          engine.recycle(w.backup);
        }
        for (std::size_t j = i + 1; j < work.size(); ++j) engine.recycle(work[j].backup);
        throw;
      }
      // What the tag's sleep released, its cached blocks included (tag_state::slept_bytes).
      const std::uint64_t cached = release_cached_of([&w](tag_id t) { return t == w.tag; });
      settle_asleep(*entry, w.mode, slept + cached, w.backup);
      report.changed.push_back(w.tag);
      report.device_bytes += slept + cached;
      report.copied_bytes += w.span_bytes;
    }
    report.timing = engine.end_timing();
    report.seconds = seconds_since(start);
    return report;
  }

  void settle_asleep(detail::tag_book::entry& entry, sleep_mode mode, std::uint64_t slept,
                     detail::sleep_backup& backup) {
    engine.recycle(entry.backup);  // empty after a wake; a discarded backup of an earlier sleep otherwise
    entry.asleep = true;
    entry.mode = mode;
    entry.slept_bytes = slept;
    entry.backup = std::move(backup);
  }

  sleep_report wake(const wake_request& request) {
    const auto start = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    sleep_report report;
    if (request.retain_backup) {
      throw invalid_argument(invalid_argument::kind::range, "retain_backup",
                             "tiered: retain_backup is not offered (a woken tag's backup goes back to the pool); "
                             "'expandable' offers it");
    }
    const std::vector<tag_id> plan = book.plan_wake(request.tags, report, "tiered");
    std::unordered_map<tag_id, std::vector<detail::sleep_unit>> units;
    std::uint64_t need = 0;
    for (auto& [base, b] : live) {
      if (!b.asleep || std::find(plan.begin(), plan.end(), b.tag) == plan.end()) continue;
      units[b.tag].push_back({reinterpret_cast<void*>(base), b.size});
      need += b.size;
    }
    // The device budget for them all first: when it is short, nothing is mapped.
    std::string why;
    if (need > 0 && !make_room(memory_tier::device, need, why)) throw_wake_oom(plan, need, why);
    // Tag by tag: when the driver refuses one, the tags before it are awake, it and those after it
    // asleep with their backups whole.
    for (tag_id tag : plan) {
      detail::tag_book::entry* entry = book.find(tag);
      const std::vector<detail::sleep_unit>& mine = units[tag];
      const std::uint64_t copied = entry->backup.saved_bytes();
      std::uint64_t mapped = 0;
      if (mine.empty()) {
        engine.recycle(entry->backup);
      } else {
        try {
          engine.map_and_restore(
              entry->backup, mine,
              [&](const detail::sleep_unit& u) {
                block& b = block_at(u.addr);
                const vmm::handle h = create_with_retry(memory_tier::device, b.size);
                try {
                  memory->map(u.addr, b.size, h, memory_tier::device);
                } catch (...) {
                  memory->release(h);
                  throw;
                }
                b.handle = h;
                b.asleep = false;
                on_reserved(memory_tier::device, b.size);
                mapped += b.size;
              },
              [&](const detail::sleep_unit& u) {
                block& b = block_at(u.addr);
                put_to_sleep(b);
                mapped -= b.size;
              });
        } catch (const out_of_memory& e) {
          throw_wake_oom({tag}, e.requested_bytes(), e.reason());
        }
        engine.recycle(entry->backup);
      }
      entry->asleep = false;
      entry->slept_bytes = 0;
      report.changed.push_back(tag);
      report.device_bytes += mapped;
      report.copied_bytes += copied;
    }
    report.seconds = seconds_since(start);
    return report;
  }

  [[noreturn]] void throw_wake_oom(const std::vector<tag_id>& tags, std::uint64_t bytes, const std::string& why) {
    std::string names;
    for (tag_id t : tags) names += (names.empty() ? "'" : ", '") + tag_name(t) + "'";
    counter.on_oom();
    const bool one = tags.size() == 1;
    throw out_of_memory("tiered: could not wake " + std::string(one ? "tag " : "tags ") + names + " (" +
                            format_bytes(bytes) + " of device memory): " + why + (one ? "; it stays" : "; they stay") +
                            " asleep",
                        bytes, stats());
  }

  std::vector<tag_state> tag_states() const {
    std::vector<tag_state> out;
    std::unordered_map<tag_id, std::size_t> slot;
    for (const detail::tag_book::entry& e : book.entries()) {
      tag_state s;
      s.tag = e.tag;
      s.asleep = e.asleep;
      s.mode = e.mode;
      s.slept_bytes = e.asleep ? e.slept_bytes : 0;
      s.backup_bytes = e.backup.bytes();
      slot.emplace(e.tag, out.size());
      out.push_back(s);
    }
    for (const auto& [base, b] : live) {
      (void)base;
      const auto s = slot.find(b.tag);
      if (s == slot.end()) continue;
      out[s->second].allocated_bytes += b.requested;
      if (b.tier == memory_tier::device && !b.asleep) out[s->second].device_bytes += b.size;
    }
    for (const auto& [key, b] : cache) {
      const auto s = slot.find(b.tag);
      if (key.first == index(memory_tier::device) && s != slot.end()) out[s->second].device_bytes += b.size;
    }
    return out;
  }

  // ----- statistics ----------------------------------------------------------------------------

  void on_reserved(memory_tier t, std::size_t size) noexcept {
    reserved[index(t)] += size;
    counter.on_reserve(size);
    if (t == memory_tier::host) peak_host_reserved = std::max(peak_host_reserved, reserved[index(t)]);
  }

  void on_allocated(memory_tier t, std::size_t bytes) noexcept {
    counter.on_allocate(bytes);
    if (t == memory_tier::host) {
      host_allocated += bytes;
      peak_host_allocated = std::max(peak_host_allocated, host_allocated);
    }
  }

  resource_stats stats() const {
    resource_stats s = counter.get();
    std::uint64_t largest = 0;
    const auto host_first = cache.lower_bound(cache_key{index(memory_tier::host), 0});
    if (host_first != cache.begin()) largest = std::prev(host_first)->first.second;  // the largest device block
    if (!cache.empty() && cache.rbegin()->first.first == index(memory_tier::host)) {
      largest = std::max<std::uint64_t>(largest, cache.rbegin()->first.second);
    }
    s.largest_free_block = static_cast<std::int64_t>(largest);
    s.host_allocated_bytes = static_cast<std::int64_t>(host_allocated);
    s.peak_host_allocated_bytes = static_cast<std::int64_t>(peak_host_allocated);
    s.host_reserved_bytes = static_cast<std::int64_t>(reserved[index(memory_tier::host)]);
    s.peak_host_reserved_bytes = static_cast<std::int64_t>(peak_host_reserved);
    s.bytes_moved_to_host = moved_to_host;
    s.bytes_moved_to_device = moved_to_device;
    return s;
  }

  [[noreturn]] void throw_oom(std::size_t bytes, const std::string& why) {
    counter.on_oom();
    throw out_of_memory("tiered: could not allocate " + format_bytes(bytes) + ": " + why, bytes, stats());
  }

  static void append(std::string& why, const std::string& reason) {
    if (!why.empty()) why += "; ";
    why += reason;
  }

  // ----- streams going away ---------------------------------------------------------------------

  void on_stream_destroyed(stream_handle gone) noexcept override {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [key, b] : cache) {
      (void)key;
      if (b.stream == gone) b.stream_done = true;  // synchronised: nothing queued on it still runs
    }
    for (auto& [base, b] : live) {
      (void)base;
      auto& on = b.used_on;
      on.erase(std::remove(on.begin(), on.end(), gone), on.end());
      if (b.stream == gone) b.stream = nullptr;
    }
  }

  std::unique_ptr<vmm> memory;
  std::unique_ptr<stream_ordering> ordering;
  const std::size_t granule;
  std::uint64_t budget[tiers] = {0, 0};
  std::atomic<tier_choice> placement;
  const tier_choice configured_placement;

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

tiered_resource::tiered_resource(std::unique_ptr<vmm> memory, tiered_options options,
                                 std::unique_ptr<stream_ordering> ordering)
    : impl_(std::make_unique<impl>(std::move(memory), options, std::move(ordering))) {}

tiered_resource::~tiered_resource() = default;

void tiered_resource::set_placement(tier_choice choice) noexcept {
  impl_->placement.store(choice, std::memory_order_relaxed);
}
tier_choice tiered_resource::placement() const noexcept { return impl_->placement.load(std::memory_order_relaxed); }
tier_choice tiered_resource::configured_placement() const noexcept { return impl_->configured_placement; }

std::uint64_t tiered_resource::device_budget_bytes() const noexcept { return impl_->budget[index(memory_tier::device)]; }
std::uint64_t tiered_resource::host_budget_bytes() const noexcept { return impl_->budget[index(memory_tier::host)]; }
std::size_t tiered_resource::granule_bytes() const noexcept { return impl_->granule; }

std::optional<memory_tier> tiered_resource::tier_of(const void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = impl_->live.upper_bound(p);
  if (it == impl_->live.begin()) return std::nullopt;
  --it;
  if (p - it->first >= it->second.size) return std::nullopt;
  return it->second.tier;
}

std::size_t tiered_resource::cached_blocks() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cache.size();
}

std::uint64_t tiered_resource::cached_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cached[0] + impl_->cached[1];
}

void* tiered_resource::do_allocate(std::size_t bytes, stream_handle stream) { return impl_->allocate(bytes, stream); }

void tiered_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  impl_->deallocate(ptr, bytes, stream);
}

void tiered_resource::do_record_stream(void* ptr, stream_handle stream) { impl_->record_stream(ptr, stream); }

bool tiered_resource::do_prefetch(void* ptr, std::size_t bytes, location to, stream_handle stream) {
  return impl_->prefetch(ptr, bytes, to, stream);
}

resource_stats tiered_resource::do_stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats();
}

void tiered_resource::do_reset_peak() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->counter.reset_peak();
  impl_->peak_host_allocated = impl_->host_allocated;
  impl_->peak_host_reserved = impl_->reserved[index(memory_tier::host)];
}

void tiered_resource::do_trim(std::size_t bytes_to_keep) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const std::uint64_t reserved = impl_->counter.get().reserved_bytes;
  if (reserved > bytes_to_keep) impl_->release_cached(nullptr, reserved - bytes_to_keep);
}

std::size_t tiered_resource::do_allocation_size(const void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
  return it == impl_->live.end() ? 0 : it->second.requested;
}

memory_kind tiered_resource::do_kind() const noexcept { return impl_->memory->kind(); }
int tiered_resource::do_device() const noexcept { return impl_->memory->device(); }

sleep_report tiered_resource::do_sleep(const sleep_request& request) { return impl_->sleep(request); }
sleep_report tiered_resource::do_wake(const wake_request& request) { return impl_->wake(request); }

std::vector<tag_state> tiered_resource::do_tag_states() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->tag_states();
}

std::uint64_t tiered_resource::do_backup_pool_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->engine.pool_bytes();
}

void tiered_resource::do_trim_backup() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->engine.trim();
}

bool tiered_resource::do_read_backup(const void* addr, std::size_t bytes, void* out) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (const detail::tag_book::entry& e : impl_->book.entries()) {
    if (e.asleep && e.mode == sleep_mode::keep && e.backup.read(addr, bytes, out)) return true;
  }
  return false;
}

const void* tiered_resource::do_backup_view(const void* addr, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (const detail::tag_book::entry& e : impl_->book.entries()) {
    if (!e.asleep || e.mode != sleep_mode::keep) continue;
    if (const void* p = e.backup.view(addr, bytes)) return p;
  }
  return nullptr;
}

void tiered_resource::do_reserve_backup(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->engine.reserve_ahead(bytes, impl_->stats());
}

void tiered_resource::do_check_awake(const void* ptr, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_awake(ptr, bytes);
}

namespace {

// Whether a tiered chain's tiers are on the device: asked for, or 'auto' where a GPU is present.
bool tiers_on_device(const chain_spec& spec) {
  const tiered_backing b = own(spec).backing;
  return b == tiered_backing::device || (b == tiered_backing::automatic && device_count() > 0);
}

}  // namespace

// 'tiered': tiered_resource (device memory, then pinned host memory), the leaf alone.
const strategy_descriptor& tiered_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "tiered";
    d.description =
        "device memory first, then pinned host memory kernels use in place (CUDA VMM, or memfd without a GPU); placement by "
        "tag, prefetch moves blocks between tiers at the same address";
    d.options_type = &typeid(tiered_spec);
    d.flags.spills_to_host = true;
    d.flags.peer_access = true;
    d.flags.sleep = true;

    using O = tiered_options;
    constexpr auto automatic = tier_choice::automatic;
    d.options = {
        choice_option<&tiered_spec::backing>(
            "upstream", "where the tiers come from: CUDA VMM, the host twin, or CUDA VMM when a GPU is present",
            {{"cuda", tiered_backing::device}, {"host", tiered_backing::host}, {"auto", tiered_backing::automatic}})
            .placement().js_only(),
        bytes_option<&tiered_spec::options, &O::device_budget_bytes>(
            "deviceBudgetBytes", "bytes the device tier may hold (unset: the device's free memory less 1 GiB; 0: all on the host)")
            .env("GPUMEM_TIERED_DEVICE_BUDGET", "tiered.device_budget")
            .doc("Bytes the device tier may hold, live and cached blocks (default: the device's free memory when the "
                 "allocator is made, less 1 GiB for the CUDA context and libraries; the host twin: 1 GiB). 0 puts "
                 "everything on the host."),
        bytes_option<&tiered_spec::options, &O::host_budget_bytes>(
            "hostBudgetBytes",
            "bytes the host tier may hold pinned (unset: MemAvailable less 10% of MemTotal, which a value only lowers)")
            .env("GPUMEM_TIERED_HOST_BUDGET", "tiered.host_budget")
            .doc("Bytes the host tier may hold pinned (default and upper bound: the host's available memory when the "
                 "allocator is made less 10% of its total, as the 'pinned' strategy's cap; a value only lowers it)."),
        choice_option<&tiered_spec::options, &O::placement>(
            "placement", "where allocations go when the calling thread chose nothing",
            {{"auto", automatic}, {"device", tier_choice::device}, {"host", tier_choice::host}})
            .env_only().env("GPUMEM_TIERED_PLACEMENT", "tiered.placement"),
        bytes_option<&tiered_spec::options, &O::backup_limit_bytes>(
            "backupLimitBytes",
            "host bytes the backups of sleeping tags may hold (unset: MemAvailable less 10% of MemTotal at each sleep)")
            .js_only(),
        bytes_option<&tiered_spec::options, &O::backup_reserve_bytes>(
            "backupReserveBytes",
            "host bytes pinned for sleep's backups ahead of the first sleep, in the background (0: none)")
            .env("GPUMEM_SLEEP_RESERVE", "")  // no describe() label: config strings stay as they were
            .doc("Host bytes pinned for the backups of sleeping tags when the allocator is made, on background "
                 "threads (nothing waits for them), so that a first sleep copies at the host link's speed instead of "
                 "pinning as it copies; counted against `backupLimitBytes`. 0 (the default): none (`reserveBackup` "
                 "asks later)."),
    };
    d.leaf_name = [](const chain_spec&) { return "tiered"; };
    d.make_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      auto r = std::make_unique<tiered_resource>(
          tiers_on_device(spec) ? make_device_vmm(spec.device, {"tiered", "upstream 'host'", 0, spec.peer_access, true})
                                : make_host_vmm(),
          own(spec).options);
      build.chain.tiered = r.get();
      build.chain.sleeper = r.get();
      return r;
    };
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(tiers_on_device(spec) ? "" : "'tiered' over the host twin holds host memory");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
